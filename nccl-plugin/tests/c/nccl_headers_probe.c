/* Prints the sizes and offsets of NCCL's net plugin ABI (v8..v12) as NCCL's own headers lay them out: the
 * reference numbers of tests/layout.rs (`layouts_match_the_values_measured_with_nccls_headers`). NCCL's headers
 * are not needed at test time; this probe is how the numbers were measured, and how to measure them again:
 *
 *   cc -I <nccl>/plugins/net/example/nccl -o probe nccl-plugin/tests/c/nccl_headers_probe.c && ./probe
 *
 * Output: "<struct> size <n>" and "<struct>.<field> <offset>" lines; tests/nccl_headers.txt records a run and
 * names the NCCL release it measured. */
#include <stddef.h>
#include <stdio.h>

#include "net.h"

#define SIZE(t) printf("%s size %zu\n", #t, sizeof(t))
#define OFF(t, f) printf("%s.%s %zu\n", #t, #f, offsetof(t, f))

#define PROPS_COMMON(t)                                                                                        \
	do {                                                                                                   \
		SIZE(t);                                                                                       \
		OFF(t, name);                                                                                  \
		OFF(t, pciPath);                                                                               \
		OFF(t, guid);                                                                                  \
		OFF(t, ptrSupport);                                                                            \
		OFF(t, regIsGlobal);                                                                           \
		OFF(t, speed);                                                                                 \
		OFF(t, port);                                                                                  \
		OFF(t, latency);                                                                               \
		OFF(t, maxComms);                                                                              \
		OFF(t, maxRecvs);                                                                              \
		OFF(t, netDeviceType);                                                                         \
		OFF(t, netDeviceVersion);                                                                      \
	} while (0)

#define PROPS_V9(t)                                                                                            \
	do {                                                                                                   \
		PROPS_COMMON(t);                                                                               \
		OFF(t, forceFlush);                                                                            \
		OFF(t, vProps);                                                                                \
		OFF(t, maxP2pBytes);                                                                           \
		OFF(t, maxCollBytes);                                                                          \
	} while (0)

#define SLOTS(t)                                                                                               \
	do {                                                                                                   \
		SIZE(t);                                                                                       \
		OFF(t, name);                                                                                  \
		OFF(t, init);                                                                                  \
		OFF(t, devices);                                                                               \
		OFF(t, getProperties);                                                                         \
		OFF(t, listen);                                                                                \
		OFF(t, connect);                                                                               \
		OFF(t, accept);                                                                                \
		OFF(t, regMr);                                                                                 \
		OFF(t, regMrDmaBuf);                                                                           \
		OFF(t, deregMr);                                                                               \
		OFF(t, isend);                                                                                 \
		OFF(t, irecv);                                                                                 \
		OFF(t, iflush);                                                                                \
		OFF(t, test);                                                                                  \
		OFF(t, closeSend);                                                                             \
		OFF(t, closeRecv);                                                                             \
		OFF(t, closeListen);                                                                           \
		OFF(t, getDeviceMr);                                                                           \
		OFF(t, irecvConsumed);                                                                         \
	} while (0)

int main(void)
{
	PROPS_COMMON(ncclNetProperties_v8_t);
	PROPS_V9(ncclNetProperties_v9_t);
	PROPS_V9(ncclNetProperties_v10_t);
	PROPS_V9(ncclNetProperties_v11_t);
	OFF(ncclNetProperties_v11_t, maxMultiRequestSize);
	PROPS_V9(ncclNetProperties_v12_t);
	OFF(ncclNetProperties_v12_t, maxMultiRequestSize);
	OFF(ncclNetProperties_v12_t, railId);
	OFF(ncclNetProperties_v12_t, planeId);
	SIZE(ncclNetVDeviceProps_v9_t);
	SIZE(ncclNetVDeviceProps_v12_t);
	SIZE(ncclNetCommConfig_v10_t);
	SIZE(ncclNetAttr_v11_t);
	SLOTS(ncclNet_v8_t);
	SLOTS(ncclNet_v9_t);
	OFF(ncclNet_v9_t, makeVDevice);
	SLOTS(ncclNet_v10_t);
	OFF(ncclNet_v10_t, makeVDevice);
	SLOTS(ncclNet_v11_t);
	OFF(ncclNet_v11_t, makeVDevice);
	OFF(ncclNet_v11_t, finalize);
	OFF(ncclNet_v11_t, setNetAttr);
	SLOTS(ncclNet_v12_t);
	OFF(ncclNet_v12_t, makeVDevice);
	OFF(ncclNet_v12_t, finalize);
	OFF(ncclNet_v12_t, setNetAttr);
	return 0;
}
