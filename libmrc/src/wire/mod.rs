//! Packet headers: views and owned representations. (being written)
