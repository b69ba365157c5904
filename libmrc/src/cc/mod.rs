//! Congestion control. (being written)
