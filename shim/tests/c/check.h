/* What the shim's C test programs share: the check printer ("ok NAME" or "FAIL NAME: ..."; the program exits
 * with the number of failed checks) and a monotonic clock in ms for time limits. Included by one test program
 * each, so its static definitions are that program's. */
#ifndef MRC_SHIM_TEST_CHECK_H
#define MRC_SHIM_TEST_CHECK_H

#include <errno.h>
#include <stdio.h>
#include <time.h>

static int failures;

static void check(int cond, const char *name, const char *detail)
{
	if (cond) {
		printf("ok %s\n", name);
	} else {
		printf("FAIL %s: %s (errno %d)\n", name, detail, errno);
		failures++;
	}
	fflush(stdout);
}

static inline double now_ms(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

#endif
