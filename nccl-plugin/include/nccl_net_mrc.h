/* The NCCL net-plugin ABI as libnccl-net-mrc.so implements it (x86_64 and aarch64 Linux).
 *
 * Written for this project from the ABI's documented layouts, version by version; it is the C rendering
 * of nccl-plugin/src/abi/ and is compiled by tests/layout.rs, which checks every size and offset of both
 * against each other and against the values measured with NCCL's own headers
 * (shared/design/verbs-nccl-abi.md section 4.2). The library exports one table per version:
 *
 *   extern const mrc_net_v8_t  ncclNetPlugin_v8;    NCCL 2.20-2.23
 *   extern const mrc_net_v9_t  ncclNetPlugin_v9;    NCCL 2.24-2.25
 *   extern const mrc_net_v10_t ncclNetPlugin_v10;   NCCL 2.26-2.27
 *   extern const mrc_net_v11_t ncclNetPlugin_v11;   NCCL 2.28-2.29
 *   extern const mrc_net_v12_t ncclNetPlugin_v12;   NCCL 2.30+
 */
#ifndef NCCL_NET_MRC_H
#define NCCL_NET_MRC_H

#include <stddef.h>
#include <stdint.h>

typedef int mrc_result_t; /* ncclResult_t: 0 success, 2 system, 3 internal, 4 invalid argument, 5 invalid usage, 6 remote */

typedef void (*mrc_logger_t)(int level, unsigned long flags, const char *file, int line, const char *fmt, ...);
typedef mrc_result_t (*mrc_profiler_t)(void **event, int type, void *phandle, int64_t plugin_id, void *ext);

#define MRC_NET_HANDLE_BYTES 128
#define MRC_PTR_HOST 1

typedef struct { int traffic_class; } mrc_comm_config_t;

typedef struct { int ndevs; int devs[4]; } mrc_vdev_v9_t;
typedef struct { int ndevs; int devs[8]; } mrc_vdev_v12_t;

typedef struct { int32_t max_peers, min_peers, max_flows, min_flows; } mrc_comm_attr_t;
typedef struct { mrc_comm_attr_t send, recv; uint32_t op, algo, proto; } mrc_net_attr_t;

#define MRC_PROPS_HEAD \
  char *name; char *pci_path; uint64_t guid; int ptr_support; int reg_is_global;
#define MRC_PROPS_TAIL \
  int speed; int port; float latency; int max_comms; int max_recvs; int device_type; int device_version;

typedef struct { MRC_PROPS_HEAD MRC_PROPS_TAIL } mrc_props_v8_t;
typedef struct {
  MRC_PROPS_HEAD int force_flush; MRC_PROPS_TAIL
  mrc_vdev_v9_t vprops; size_t max_p2p_bytes; size_t max_coll_bytes;
} mrc_props_v9_t; /* also v10 */
typedef struct {
  MRC_PROPS_HEAD int force_flush; MRC_PROPS_TAIL
  mrc_vdev_v9_t vprops; size_t max_p2p_bytes; size_t max_coll_bytes; int max_multi_request;
} mrc_props_v11_t;
typedef struct {
  MRC_PROPS_HEAD int force_flush; MRC_PROPS_TAIL
  mrc_vdev_v12_t vprops; size_t max_p2p_bytes; size_t max_coll_bytes; int max_multi_request;
  int16_t rail_id; int16_t plane_id;
} mrc_props_v12_t;

/* Slots after init/devices/getProperties/listen/connect: the same order in every version. */
#define MRC_NET_SLOTS_MID \
  mrc_result_t (*accept)(void *listen_comm, void **recv_comm, void **recv_dev_comm); \
  mrc_result_t (*reg_mr)(void *comm, void *data, size_t size, int type, void **mhandle); \
  mrc_result_t (*reg_mr_dmabuf)(void *comm, void *data, size_t size, int type, uint64_t off, int fd, void **mhandle); \
  mrc_result_t (*dereg_mr)(void *comm, void *mhandle);
#define MRC_NET_SLOTS_END \
  mrc_result_t (*iflush)(void *recv_comm, int n, void **data, int *sizes, void **mhandles, void **request); \
  mrc_result_t (*test)(void *request, int *done, int *sizes); \
  mrc_result_t (*close_send)(void *send_comm); \
  mrc_result_t (*close_recv)(void *recv_comm); \
  mrc_result_t (*close_listen)(void *listen_comm); \
  mrc_result_t (*get_device_mr)(void *comm, void *mhandle, void **dptr); \
  mrc_result_t (*irecv_consumed)(void *recv_comm, int n, void *request);

typedef struct {
  const char *name;
  mrc_result_t (*init)(mrc_logger_t log);
  mrc_result_t (*devices)(int *ndev);
  mrc_result_t (*get_properties)(int dev, mrc_props_v8_t *props);
  mrc_result_t (*listen)(int dev, void *handle, void **listen_comm);
  mrc_result_t (*connect)(int dev, void *handle, void **send_comm, void **send_dev_comm);
  MRC_NET_SLOTS_MID
  mrc_result_t (*isend)(void *send_comm, void *data, int size, int tag, void *mhandle, void **request);
  mrc_result_t (*irecv)(void *recv_comm, int n, void **data, int *sizes, int *tags, void **mhandles, void **request);
  MRC_NET_SLOTS_END
} mrc_net_v8_t;

typedef struct {
  const char *name;
  mrc_result_t (*init)(mrc_logger_t log);
  mrc_result_t (*devices)(int *ndev);
  mrc_result_t (*get_properties)(int dev, mrc_props_v9_t *props);
  mrc_result_t (*listen)(int dev, void *handle, void **listen_comm);
  mrc_result_t (*connect)(int dev, void *handle, void **send_comm, void **send_dev_comm);
  MRC_NET_SLOTS_MID
  mrc_result_t (*isend)(void *send_comm, void *data, size_t size, int tag, void *mhandle, void **request);
  mrc_result_t (*irecv)(void *recv_comm, int n, void **data, size_t *sizes, int *tags, void **mhandles, void **request);
  MRC_NET_SLOTS_END
  mrc_result_t (*make_vdevice)(int *d, mrc_vdev_v9_t *props);
} mrc_net_v9_t;

typedef struct {
  const char *name;
  mrc_result_t (*init)(mrc_logger_t log, mrc_profiler_t prof);
  mrc_result_t (*devices)(int *ndev);
  mrc_result_t (*get_properties)(int dev, mrc_props_v9_t *props);
  mrc_result_t (*listen)(int dev, void *handle, void **listen_comm);
  mrc_result_t (*connect)(int dev, mrc_comm_config_t *config, void *handle, void **send_comm, void **send_dev_comm);
  MRC_NET_SLOTS_MID
  mrc_result_t (*isend)(void *send_comm, void *data, size_t size, int tag, void *mhandle, void *phandle, void **request);
  mrc_result_t (*irecv)(void *recv_comm, int n, void **data, size_t *sizes, int *tags, void **mhandles, void **phandles,
                        void **request);
  MRC_NET_SLOTS_END
  mrc_result_t (*make_vdevice)(int *d, mrc_vdev_v9_t *props);
} mrc_net_v10_t;

#define MRC_NET_V11_BODY(PROPS, VDEV) \
  const char *name; \
  mrc_result_t (*init)(void **ctx, uint64_t comm_id, mrc_comm_config_t *config, mrc_logger_t log, mrc_profiler_t prof); \
  mrc_result_t (*devices)(int *ndev); \
  mrc_result_t (*get_properties)(int dev, PROPS *props); \
  mrc_result_t (*listen)(void *ctx, int dev, void *handle, void **listen_comm); \
  mrc_result_t (*connect)(void *ctx, int dev, void *handle, void **send_comm, void **send_dev_comm); \
  MRC_NET_SLOTS_MID \
  mrc_result_t (*isend)(void *send_comm, void *data, size_t size, int tag, void *mhandle, void *phandle, void **request); \
  mrc_result_t (*irecv)(void *recv_comm, int n, void **data, size_t *sizes, int *tags, void **mhandles, void **phandles, \
                        void **request); \
  MRC_NET_SLOTS_END \
  mrc_result_t (*make_vdevice)(int *d, VDEV *props); \
  mrc_result_t (*finalize)(void *ctx); \
  mrc_result_t (*set_net_attr)(void *ctx, mrc_net_attr_t *attr);

typedef struct { MRC_NET_V11_BODY(mrc_props_v11_t, mrc_vdev_v9_t) } mrc_net_v11_t;
typedef struct { MRC_NET_V11_BODY(mrc_props_v12_t, mrc_vdev_v12_t) } mrc_net_v12_t;

#endif
