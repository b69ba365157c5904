/* The smallest OCP MRC program: built by tests/install.rs with `pkg-config --cflags --libs mrc` against the
 * installed libmrc.so, and statically against libmrc.a. Prints the API versions and whether a non-device is
 * MRC (it is not). */
#include <stdio.h>

#include <mrc.h>
#include <mrc_ctl.h>

int main(void)
{
	uint32_t cur = 0, last = 0, ctl = 0;
	struct mrc_device_attr a;
	int sup = -1, dummy = 0;
	mrc_query_version(&cur, &last, NULL, NULL);
	mrc_ctl_query_version(&ctl, NULL, NULL, NULL);
	int rc = mrc_query_device((struct ibv_context *)&dummy, &a, &sup);
	printf("api %u.%u.%u (oldest %u.%u.%u) ctl %u.%u.%u; rc %d supported %d\n", cur >> 24, (cur >> 16) & 0xff,
	       cur & 0xffff, last >> 24, (last >> 16) & 0xff, last & 0xffff, ctl >> 24, (ctl >> 16) & 0xff, ctl & 0xffff,
	       rc, sup);
	return cur == MRC_API_CURRENT_VERSION && ctl == MRC_CTL_API_CURRENT_VERSION && rc == 0 && sup == 0 ? 0 : 1;
}
