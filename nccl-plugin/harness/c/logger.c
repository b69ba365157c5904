/* NCCL's ncclDebugLogger_t for the harness: formats the line and passes it to the Rust sink. */
#include <stdarg.h>
#include <stdio.h>

void mrc_harness_log_sink(int level, unsigned long flags, const char *file, int line, const char *msg);

void mrc_harness_logger(int level, unsigned long flags, const char *file, int line, const char *fmt, ...) {
  char buf[2048];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  mrc_harness_log_sink(level, flags, file, line, buf);
}
