/* mrc.h: the MRC (Multipath Reliable Connection) application API of libmrc.
 *
 * Written for this project. Names, constants, structure layouts and calling conventions follow the OCP MRC
 * application API 1.0.1, so programs written against that API build and run against libmrc unchanged; the
 * capi/tests/layout test checks every size, offset and constant against a table measured from the OCP header.
 *
 * Devices, protection domains and memory regions are ordinary verbs objects: open the device with
 * ibv_open_device(), allocate PDs with ibv_alloc_pd() and register memory with ibv_reg_mr(). libmrc carries
 * MRC's verbs devices (the ibv_* entry points) too: run with LD_PRELOAD=libmrc.so; see capi/README.md.
 *
 * Return conventions (capi/README.md has the table): calls documented "0 / -1" return -1 and set errno;
 * calls documented "like ibv_X" return what ibv_X returns (an errno value, or NULL with errno set).
 *
 * SPDX-License-Identifier: MIT OR Apache-2.0
 */
#ifndef _MRC_API_H_
#define _MRC_API_H_

#include <stdint.h>
#include <infiniband/verbs.h>

#include <mrc_api_ver.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Size of the opaque vendor configuration blobs in hints and QP attributes. */
#define MRC_MAX_VENDOR_CFG_SIZE 128

/* Wire protocol revisions, as bits: devices report the set they speak, QPs ask for one (0: the default). */
enum mrc_protocol_version {
	MRC_PROTOCOL_VERSION_0 = 0,
	MRC_PROTOCOL_VERSION_1 = 1 << 0,
};

/* Opaque objects. */
struct mrc_context;
struct mrc_qp_hint;
struct mrc_qp;
struct mrc_cq;
struct mrc_comp_channel;

/* Optional device features (mrc_device_attr.cap). */
enum mrc_device_cap {
	MRC_DEVICE_CAP_TRIM_NACK = 1 << 0,   /* answers trimmed packets with a NACK */
	MRC_DEVICE_CAP_DYNAMIC_MPR = 1 << 1, /* can resize the reorder window (MPR) at run time */
	MRC_DEVICE_CAP_SVC_TIME = 1 << 2,    /* reports its service time as a responder */
};

/* What an MRC device offers. */
struct mrc_device_attr {
	uint32_t mrc_protocol_version; /* set of enum mrc_protocol_version bits; 0: unspecified */
	struct {
		uint16_t max_wimm;      /* largest max_wimm a QP may ask for as requester */
		uint16_t max_wimm_dest; /* largest max_wimm_dest as responder */
	} wimm_attr;
	struct {
		uint8_t max_mpr;        /* largest MPR, in units of 128 PSNs */
		uint8_t mpr_resolution; /* MPR granularity, in units of 128 PSNs */
	} mpr_attr;
	struct {
		uint32_t max_qp_hint; /* QP hints one context may hold */
	} qp_attr;
	uint32_t cap; /* enum mrc_device_cap bits */
};

/* Whether a verbs device speaks MRC, and what it offers: *supported is 0 for a device that does not (then
 * the call still returns 0). The _ex form names the MRC context whose API revision governs the answer and is
 * the one to use from revision 1.0.1 on; the plain form answers as revision 1.0.0. 0 / -1. */
#if MRC_API_VER_USED >= MRC_API_VER(1, 0, 1)
int mrc_query_device_ex(struct ibv_context *context, struct mrc_context *mcontext,
			struct mrc_device_attr *attr, int *supported);
#endif
int mrc_query_device(struct ibv_context *context, struct mrc_device_attr *attr, int *supported);

/* The API revisions the library implements (MRC_API_VER numbers): the current one, the oldest still honoured,
 * and the same pair for vendor extensions. Callable before any context exists. NULL outputs are skipped. */
void mrc_query_version(uint32_t *current_version, uint32_t *last_supported_version,
		       uint32_t *vendor_version, uint32_t *last_supported_vendor_version);

/* Which revisions the program was written for (0: not said; the library assumes its newest). */
struct mrc_context_attr {
	uint32_t mrc_api_version_used;
	uint32_t mrc_vendor_api_version_used;
};

/* An MRC context on an open verbs device: the parent of every other MRC object of the program on that device.
 * context_attr may be NULL. Returns NULL with errno set on failure. */
struct mrc_context *mrc_create_context(struct ibv_context *vcontext,
				       struct mrc_context_attr *context_attr);

/* Frees a context; EBUSY while objects created on it remain. 0 / -1. */
int mrc_destroy_context(struct mrc_context *mrc_ctx);

/* Completion channels: a file descriptor that becomes readable when an armed CQ gets a completion.
 * Create: 0 / -1 (like ibv_create_comp_channel). The fd may be polled or made non-blocking. */
int mrc_create_comp_channel(struct mrc_context *mrc_ctx, struct mrc_comp_channel **channel);
int mrc_get_comp_channel_fd(struct mrc_comp_channel *channel, int *fd); /* 0 / -1 */
int mrc_destroy_comp_channel(struct mrc_comp_channel *channel); /* like ibv_destroy_comp_channel */

/* Completion queues. Create returns NULL with errno set on failure (like ibv_create_cq); channel may be NULL;
 * comp_vector is below the device's num_comp_vectors. */
struct mrc_cq *mrc_create_cq(struct mrc_context *mrc_ctx, int cqe, void *cq_context,
			     struct mrc_comp_channel *channel, int comp_vector);
/* Up to num_entries completions into wc; returns how many (fewer: the CQ is now empty), or -1. */
int mrc_poll_cq(struct mrc_cq *cq, int num_entries, struct ibv_wc *wc);
int mrc_destroy_cq(struct mrc_cq *cq); /* like ibv_destroy_cq */

/* Traffic-pattern hints shared by a group of QPs, so the provider can size their resources. */
struct mrc_qp_hint_attr {
	int num_qps_per_peer;      /* QPs of the group sending to one peer address at a time */
	int num_send_peers;        /* distinct peer addresses the group sends to at a time */
	int num_remote_recv_peers; /* remote QPs sending to the same peer as this one (its incast) */
	uint8_t vendor_cfg[MRC_MAX_VENDOR_CFG_SIZE];
};

/* Which mrc_qp_hint_attr fields a query or modify covers. */
enum mrc_qp_hint_attr_mask {
	MRC_QP_HINT_NUM_QPS_PER_PEER = 1 << 0,
	MRC_QP_HINT_NUM_SEND_PEERS = 1 << 1,
	MRC_QP_HINT_NUM_REMOTE_RECV_PEERS = 1 << 2,
	MRC_QP_HINT_VENDOR_CFG = 1 << 31,
};

struct mrc_qp_hint_init_attr {
	struct mrc_qp_hint_attr attr;
};

/* QP hints. Create returns NULL with errno set; destroy, query and modify are 0 / -1 (destroy: EBUSY while
 * a QP uses the hint). */
struct mrc_qp_hint *mrc_create_qp_hint(struct mrc_context *mrc_ctx, struct mrc_qp_hint_init_attr *init_attr);
int mrc_destroy_qp_hint(struct mrc_qp_hint *qp_hint);
int mrc_query_qp_hint(struct mrc_qp_hint *qp_hint, struct mrc_qp_hint_attr *qp_hint_attr,
		      int qp_hint_attr_mask);
int mrc_modify_qp_hint(struct mrc_qp_hint *qp_hint, struct mrc_qp_hint_attr *qp_hint_attr,
		       int qp_hint_attr_mask);

/* What mrc_create_qp needs. MRC QPs are reliable-connected and move data with RDMA WRITE and WRITE with
 * immediate only; send_ops_flags takes IBV_QP_EX_WITH_RDMA_WRITE[_WITH_IMM] (0: both). */
struct mrc_qp_init_attr {
	void *qp_context;
	struct mrc_cq *send_cq;
	struct mrc_cq *recv_cq;
	struct ibv_qp_cap cap; /* in: what is needed; out (and query): what was granted */
	int sq_sig_all;
	struct ibv_pd *pd; /* a PD of the context's verbs device */
	uint64_t send_ops_flags;
	enum mrc_protocol_version protocol_version; /* one bit, or 0 for the default */
};

/* A new QP in RESET, or NULL with errno set (like ibv_create_qp). */
struct mrc_qp *mrc_create_qp(struct mrc_context *mrc_ctx, struct mrc_qp_init_attr *mrc_qp_attr);
int mrc_destroy_qp(struct mrc_qp *qp); /* like ibv_destroy_qp */

/* The MRC attributes of a QP, and at which transition each may be set:
 *   to INIT: MRC_QP_HINT, MRC_QP_EV_PROFILE_ID, MRC_QP_CC_PROFILE_ID
 *   to RTR:  MRC_QP_MAX_WIMM_DEST, MRC_QP_MPR_DEST, MRC_QP_CAP (dynamic MPR)
 *   to RTS:  MRC_QP_MAX_WIMM, MRC_QP_MPR, MRC_QP_RETRY_CNT, MRC_QP_TIMEOUT
 * (capi/README.md lists what libmrc accepts at each step.) */
enum mrc_qp_attr_mask {
	MRC_QP_MAX_WIMM = 1 << 0,
	MRC_QP_MAX_WIMM_DEST = 1 << 1,
	MRC_QP_MPR = 1 << 2,
	MRC_QP_MPR_DEST = 1 << 3,
	MRC_QP_TIMEOUT = 1 << 4,
	MRC_QP_EV_PROFILE_ID = 1 << 5,
	MRC_QP_CC_PROFILE_ID = 1 << 6,
	MRC_QP_HINT = 1 << 7,
	MRC_QP_RETRY_CNT = 1 << 8,
	MRC_QP_CAP = 1 << 9,
	MRC_QP_VENDOR_CFG = 1 << 31,
};

/* Per-QP feature switches (mrc_qp_attr.cap). */
enum mrc_qp_cap {
	MRC_QP_CAP_TRIM_NACK_DEST_UNSUPPORTED = 1 << 0, /* the peer cannot send trim NACKs */
	MRC_QP_CAP_DYNAMIC_MPR = 1 << 1,                /* resize MPR at run time (both ends must agree) */
	MRC_QP_CAP_SVC_TIME_DEST_UNSUPPORTED = 1 << 2,  /* the peer does not report service time */
};

struct mrc_qp_attr {
	struct {
		uint8_t mpr;      /* reorder window as requester, units of 128 PSNs */
		uint8_t mpr_dest; /* as responder */
	} mpr;
	struct {
		uint16_t max_wimm;      /* WRITEs with immediate in flight, as requester */
		uint16_t max_wimm_dest; /* as responder */
	} wimm;
	uint8_t timeout; /* ACK timeout: 1.024 us * 2^timeout; at most 24 (about 17 s) */
	struct {
		uint64_t ev_profile_id; /* EV and CC profiles a controller set up (mrc_ctl.h) */
		uint64_t cc_profile_id;
	} profile;
	struct {
		uint8_t linear_cnt; /* retries at a fixed interval, at most 7 */
		uint8_t exp_cnt;    /* then with exponential backoff, at most 25 (25: without end) */
	} retry;
	struct mrc_qp_hint *qp_hint; /* NULL: none */
	uint32_t cap;                /* enum mrc_qp_cap bits */
	uint8_t vendor_cfg[MRC_MAX_VENDOR_CFG_SIZE];
};

/* The verbs attributes in vattr_mask, the MRC ones in mrc_attr_mask, and (if init_attr is not NULL) the
 * creation attributes. Like ibv_query_qp. */
int mrc_query_qp(struct mrc_qp *qp, struct ibv_qp_attr *vattr, int vattr_mask, struct mrc_qp_attr *mrc_attr,
		 int mrc_attr_mask, struct mrc_qp_init_attr *init_attr);

/* Moves a QP through RESET -> INIT -> RTR -> RTS (and to ERR or RESET) with verbs and MRC attributes.
 * Accepted where verbs allows them and ignored, named once in the log: IBV_QP_PORT (must be 1), IBV_QP_TIMEOUT
 * and IBV_QP_RETRY_CNT (the MRC ones rule), IBV_QP_RNR_RETRY, IBV_QP_MIN_RNR_TIMER, IBV_QP_MAX_QP_RD_ATOMIC,
 * IBV_QP_MAX_DEST_RD_ATOMIC. Not taken (EINVAL): IBV_QP_ALT_PATH, IBV_QP_PATH_MIG_STATE. The peer is found by
 * the GID of IBV_QP_AV (dlid optional); the source GID is the device's GID 0. Like ibv_modify_qp. */
int mrc_modify_qp(struct mrc_qp *qp, struct ibv_qp_attr *vattr, int vattr_mask, struct mrc_qp_attr *mrc_attr,
		  int mrc_attr_mask);

int mrc_get_qpn(struct mrc_qp *qp, uint32_t *qpn); /* 0 / -1 */

/* Receives for WRITE with immediate (from INIT on): 0, or -1 with errno set and *bad_wr the first one not
 * posted. */
int mrc_post_recv(struct mrc_qp *qp, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad_wr);
/* RDMA WRITE and WRITE with immediate (in RTS): like ibv_post_send. */
int mrc_post_send(struct mrc_qp *qp, struct ibv_send_wr *wr, struct ibv_send_wr **bad_wr);

/* An asynchronous event and the object it concerns. */
struct mrc_async_event {
	union {
		struct mrc_cq *cq;
		struct mrc_qp *qp;
		int port_num;
	} element;
	enum ibv_event_type event_type;
};

/* The context's next event (QP fatal, CQ error, port active/error); like ibv_get_async_event: blocks until
 * one is queued unless the verbs context's async_fd is non-blocking (then -1 with EAGAIN). Acknowledge each
 * with mrc_ack_async_event. */
int mrc_get_async_event(struct mrc_context *mrc_ctx, struct mrc_async_event *event);
void mrc_ack_async_event(struct mrc_async_event *event);

/* Arms a CQ: its next completion (solicited_only: next solicited one) signals its channel once. Like
 * ibv_req_notify_cq. */
int mrc_req_notify_cq(struct mrc_cq *cq, int solicited_only);
/* Blocks (unless the fd is non-blocking) until the channel is signalled; names the CQ. 0 / -1. */
int mrc_get_cq_event(struct mrc_comp_channel *channel, struct mrc_cq **cq, void **cq_context);
/* Acknowledges events taken with mrc_get_cq_event; mrc_destroy_cq waits until all are. */
void mrc_ack_cq_events(struct mrc_cq *cq, unsigned int nevents);

#ifdef __cplusplus
}
#endif

#endif /* _MRC_API_H_ */
