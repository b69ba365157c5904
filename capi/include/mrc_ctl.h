/* mrc_ctl.h: the MRC controller API of libmrc: device limits, port administration, entropy value (EV) format
 * and EV profiles, congestion control (CC) profiles, EV events and endpoint probes.
 *
 * Written for this project. Names, constants, structure layouts and calling conventions follow the OCP MRC
 * controller API 1.0.1 (checked by capi/tests/layout). A controller opens the verbs device and creates an MRC
 * context with mrc.h, then configures profiles by numeric ID; applications name those IDs in mrc_modify_qp.
 *
 * Profiles of every kind move INIT -> OFFLINE -> ONLINE and back (ONLINE -> OFFLINE -> INIT). An ID nobody
 * configured reads as INIT. Only OFFLINE profiles take most changes; QPs use ONLINE ones. 0 / -1 (errno set)
 * unless said otherwise.
 *
 * SPDX-License-Identifier: MIT OR Apache-2.0
 */
#ifndef _MRC_CTL_API_H_
#define _MRC_CTL_API_H_

#include <stdint.h>
#include <infiniband/verbs.h>

#include <mrc.h>
#include <mrc_ctl_api_ver.h>

#ifdef __cplusplus
extern "C" {
#endif

#define MRC_CTL_MAX_VENDOR_CFG_SIZE 128

/* An EV slot that holds no value yet (all zero, port 0). */
#define MRC_CTL_EV_UNPOPULATED ((struct mrc_ctl_ev){ .val = { 0 }, .port = 0 })

/* Bytes in one EV value. */
#define MRC_CTL_EV_MAX_BYTES 32

/* Controller protocol revisions, as bits (0: unspecified). */
enum mrc_ctl_protocol_version {
	MRC_CTL_PROTOCOL_VERSION_0 = 0,
	MRC_CTL_PROTOCOL_VERSION_1 = 1 << 0,
};

/* Life cycle shared by every profile kind. */
enum mrc_ctl_profile_state {
	MRC_CTL_PROFILE_INIT,    /* blank */
	MRC_CTL_PROFILE_OFFLINE, /* configured, not in use */
	MRC_CTL_PROFILE_ONLINE,  /* usable by QPs */
};

/* ---- Device ---------------------------------------------------------------------------------------- */

/* Optional controller features (mrc_ctl_device_attr.opt_attr). */
enum mrc_ctl_attr_opt {
	MRC_CTL_OPT_CAP_EV_PROFILE_MODIFY_ONLINE = 1 << 0,  /* EV profiles change while ONLINE */
	MRC_CTL_OPT_CAP_CC_PROFILE_MODIFY_ONLINE = 1 << 1,  /* CC profiles change while ONLINE */
	MRC_CTL_OPT_CAP_EV_EVENT = 1 << 2,                  /* EV state changes are reported */
	MRC_CTL_OPT_CAP_EV_EXPLICIT_RANGE = 1 << 3,         /* explicit EVs must be one consecutive range */
	MRC_CTL_OPT_CAP_EV_EVENT_PRECISE_DROP_CNT = 1 << 4, /* drop_count counts lost events exactly */
	MRC_CTL_OPT_CAP_EP_OP_EV_PROBE = 1 << 5,            /* mrc_ctl_ep_batch_send_wait sends EV probes */
};

struct mrc_ctl_device_attr {
	uint32_t mrc_ctl_protocol_version; /* set of enum mrc_ctl_protocol_version bits */
	struct {
		uint32_t ev_max_fmt_profiles;  /* EV format profiles that can be configured at once */
		uint32_t ev_max_profiles;      /* EV profiles that can be configured at once */
		uint32_t ev_max_count;         /* EVs over all profiles */
		uint32_t ev_free_count;        /* of which not yet taken */
		uint32_t ev_max_count_profile; /* EVs in one profile */
		uint32_t ev_count_align;       /* a profile's EV count is a multiple of this */
		uint32_t ev_max_width;         /* significant bits of an EV value */
		uint32_t ev_fmt_mode_mask;     /* enum mrc_ctl_ev_fmt_mode bits supported */
		uint32_t ev_mode_mask;         /* enum mrc_ctl_ev_mode bits supported */
		uint32_t ev_op_max_entries;    /* entries in one EV operation; 0: no limit */
	} ev;
	struct {
		uint32_t cc_max_profiles;
		const char **algorithms; /* NULL-terminated names, owned by the library ("uet-1.0-nscc") */
	} cc;
	uint32_t phy_port_mask; /* bit N: port N (1-based) belongs to this device */
	uint32_t opt_attr;      /* enum mrc_ctl_attr_opt bits */
};

/* The controller view of a device. The _ex form names the MRC context and reports *supported (0 for a verbs
 * device that is not MRC; then the call returns 0); the plain form fails instead. */
#if MRC_CTL_API_VER_USED >= MRC_CTL_API_VER(1, 0, 1)
int mrc_ctl_query_device_ex(struct ibv_context *context, struct mrc_context *mcontext,
			    struct mrc_ctl_device_attr *ctl_attr, int *supported);
#endif
int mrc_ctl_query_device(struct ibv_context *context, struct mrc_ctl_device_attr *ctl_attr);

/* The controller API revisions implemented (MRC_CTL_API_VER numbers); see mrc_query_version. */
void mrc_ctl_query_version(uint32_t *current_version, uint32_t *last_supported_version,
			   uint32_t *vendor_version, uint32_t *last_supported_vendor_version);

/* ---- Ports (MRC planes) ---------------------------------------------------------------------------- */

enum mrc_ctl_port_admin_state {
	MRC_CTL_PORT_ADMIN_DISABLED = 0,
	MRC_CTL_PORT_ADMIN_ENABLED = 1,
};

enum mrc_ctl_port_attr_mask {
	MRC_CTL_PORT_ADMIN_STATE = 1 << 0,
};

struct mrc_ctl_port_attr {
	enum mrc_ctl_port_admin_state port_admin_state;
};

int mrc_ctl_query_port(struct mrc_context *context, uint8_t port_num, struct mrc_ctl_port_attr *attr,
		       int attr_mask);
int mrc_ctl_modify_port(struct mrc_context *context, uint8_t port_num, struct mrc_ctl_port_attr *attr,
			int attr_mask);

/* ---- EV format profiles: how an EV is laid out in a packet ------------------------------------------ */

enum mrc_ctl_ev_fmt_mode {
	MRC_CTL_EV_FMT_MODE_STEV = 1 << 0, /* spread over the IPv6 flow label and UDP source port */
	MRC_CTL_EV_FMT_MODE_SRV6 = 1 << 1, /* SRv6 uSID destination (and optionally one SRH segment) */
	MRC_CTL_EV_FMT_MODE_UDP = 1 << 2,  /* the UDP source port alone */
};

enum mrc_ctl_ev_fmt_op {
	MRC_CTL_EV_FMT_OP_MODIFY_FIELDS,
	MRC_CTL_EV_FMT_OP_QUERY_FIELDS,
};

enum mrc_ctl_ev_fmt_profile_attr_mask {
	MRC_CTL_EV_FMT_PROFILE_STATE = 1 << 0,
	MRC_CTL_EV_FMT_PROFILE_CUR_STATE = 1 << 1,
	MRC_CTL_EV_FMT_PROFILE_MODE = 1 << 2,
	MRC_CTL_EV_FMT_PROFILE_OP = 1 << 3,
	MRC_CTL_EV_FMT_VENDOR_CFG = 1 << 31,
};

struct mrc_ctl_ev_fmt_field {
	uint8_t width; /* bits */
};

struct mrc_ctl_ev_fmt_profile_attr {
	enum mrc_ctl_profile_state profile_state;     /* target state (modify) */
	enum mrc_ctl_profile_state cur_profile_state; /* current state (query; optional check on modify) */
	enum mrc_ctl_ev_fmt_mode ev_fmt_mode;
	struct {
		enum mrc_ctl_ev_fmt_op op;
		struct mrc_ctl_ev_fmt_field *fmt_fields;
		int fmt_field_count; /* array length in; fields held out (E2BIG when too short) */
	} ev_fmt_op;
	uint8_t vendor_cfg[MRC_CTL_MAX_VENDOR_CFG_SIZE];
};

/* To OFFLINE needs MODE; to ONLINE needs fields set (MODIFY_FIELDS). EBUSY while an ONLINE EV profile uses
 * the format; E2BIG for fields the device cannot carry. */
int mrc_ctl_modify_ev_fmt_profile(struct mrc_context *mrc_ctx, uint64_t ev_fmt_profile_id,
				  struct mrc_ctl_ev_fmt_profile_attr *attr, int attr_mask);
int mrc_ctl_query_ev_fmt_profile(struct mrc_context *mrc_ctx, uint64_t ev_fmt_profile_id,
				 struct mrc_ctl_ev_fmt_profile_attr *attr, int attr_mask);

/* ---- EVs ------------------------------------------------------------------------------------------- */

/* An EV value: STEV and UDP use the first 4 bytes (a uint32_t in host order); SRv6 the first 16 bytes (the
 * destination) and the next 16 (the SRH segment). */
typedef uint8_t mrc_ctl_ev_t[MRC_CTL_EV_MAX_BYTES];

struct mrc_ctl_ev {
	mrc_ctl_ev_t val;
	uint8_t port; /* 1-based */
};

enum mrc_ctl_ev_state {
	MRC_CTL_EV_GOOD = 1 << 0,
	MRC_CTL_EV_ASSUMED_BAD = 1 << 1, /* retired by the transport after loss */
	MRC_CTL_EV_DENIED = 1 << 2,      /* excluded by the controller */
	MRC_CTL_EV_UNKNOWN = 1 << 31,
};

/* ---- EV profiles: the EVs QPs spray over ----------------------------------------------------------- */

enum mrc_ctl_ev_mode {
	MRC_CTL_EV_MODE_AUTO = 1 << 0, /* the device picks EVs itself */
	MRC_CTL_EV_MODE_EXP = 1 << 1,  /* the controller lists them */
	MRC_CTL_EV_MODE_GEN = 1 << 2,  /* the device generates them from field rules */
};

enum mrc_ctl_ev_op {
	MRC_CTL_EV_OP_REPLACE_EV,
	MRC_CTL_EV_OP_MODIFY_EV_STATE,
	MRC_CTL_EV_OP_QUERY_EV_STATE,
	MRC_CTL_EV_OP_QUERY_EV_ARRAY,
};

enum mrc_ctl_ev_fields_op {
	MRC_CTL_EV_FIELDS_OP_MODIFY_FIELDS,
	MRC_CTL_EV_FIELDS_OP_QUERY_FIELDS,
};

enum mrc_ctl_ev_profile_attr_mask {
	MRC_CTL_EV_PROFILE_STATE = 1 << 0,
	MRC_CTL_EV_PROFILE_CUR_STATE = 1 << 1,
	MRC_CTL_EV_PROFILE_MODE = 1 << 2,
	MRC_CTL_EV_PROFILE_FMT_ID = 1 << 3,
	MRC_CTL_EV_PROFILE_COUNT = 1 << 4,
	MRC_CTL_EV_PROFILE_MIN_ACTIVE = 1 << 5,
	MRC_CTL_EV_PROFILE_EVENT_MASK = 1 << 6,
	MRC_CTL_EV_PROFILE_EV_OP = 1 << 7,
	MRC_CTL_EV_PROFILE_EV_FIELDS_OP = 1 << 8,
	MRC_CTL_EV_PROFILE_VENDOR_CFG = 1 << 31,
};

/* One field of a generated EV: start from init_val (width bits), then put EV bits where mask has ones. */
struct mrc_ctl_ev_field {
	uint32_t width;
	uint32_t init_val;
	uint32_t min_val;
	uint32_t max_val;
	uint32_t mask;
};

enum mrc_ctl_ev_op_flags {
	MRC_CTL_EV_OP_F_ALL_COPIES = 1 << 0, /* act on every slot holding ev, not only the first */
};

/* One entry of an EV operation:
 *   REPLACE_EV:      ev, ev_new and state in; flags optional
 *   MODIFY_EV_STATE: ev and state in; flags optional
 *   QUERY_EV_STATE:  ev in; state out
 *   QUERY_EV_ARRAY:  ev and state out */
struct mrc_ctl_ev_op_entry {
	struct mrc_ctl_ev ev;
	struct mrc_ctl_ev ev_new;
	enum mrc_ctl_ev_state state;
	uint32_t flags; /* enum mrc_ctl_ev_op_flags bits */
};

struct mrc_ctl_ev_profile_attr {
	enum mrc_ctl_profile_state profile_state;
	enum mrc_ctl_profile_state cur_profile_state;
	enum mrc_ctl_ev_mode ev_mode;
	uint64_t ev_fmt_profile_id;
	uint32_t ev_count;      /* slots in the EV array */
	uint32_t ev_min_active; /* EVs kept in use even when they look bad; at most ev_count */
	int ev_event_mask;      /* MRC_CTL_EV_GOOD and/or MRC_CTL_EV_ASSUMED_BAD: changes to report */
	struct {
		enum mrc_ctl_ev_op op;
		struct mrc_ctl_ev_op_entry *entries;
		int entry_count; /* array length in; EVs held out for QUERY_EV_ARRAY (E2BIG when too short) */
	} ev_op;
	struct {
		enum mrc_ctl_ev_fields_op op;
		struct mrc_ctl_ev_field *fields;
		int field_count;
	} ev_fields_op;
	uint8_t vendor_cfg[MRC_CTL_MAX_VENDOR_CFG_SIZE];
};

/* To OFFLINE needs MODE, and FMT_ID and COUNT unless the mode is AUTO; an explicit profile's slots then read
 * as MRC_CTL_EV_UNPOPULATED and must all be filled (REPLACE_EV) before ONLINE. EV_OP and EV_FIELDS_OP are
 * mutually exclusive. An EV operation stops at its first failing entry (earlier ones took effect). Errors:
 * EINVAL, E2BIG, ENOENT (no such EV), EBUSY (QPs use the profile). */
int mrc_ctl_modify_ev_profile(struct mrc_context *mrc_ctx, uint64_t ev_profile_id,
			      struct mrc_ctl_ev_profile_attr *attr, int attr_mask);
int mrc_ctl_query_ev_profile(struct mrc_context *mrc_ctx, uint64_t ev_profile_id,
			     struct mrc_ctl_ev_profile_attr *attr, int attr_mask);

/* ---- CC profiles ----------------------------------------------------------------------------------- */

enum mrc_ctl_cc_profile_attr_mask {
	MRC_CTL_CC_PROFILE_STATE = 1 << 0,
	MRC_CTL_CC_PROFILE_CUR_STATE = 1 << 1,
	MRC_CTL_CC_PROFILE_ALGORITHM = 1 << 2,
	MRC_CTL_CC_PROFILE_CONFIG = 1 << 3,
	MRC_CTL_CC_PROFILE_VENDOR_CFG = 1 << 31,
};

struct mrc_ctl_cc_profile_attr {
	enum mrc_ctl_profile_state profile_state;
	enum mrc_ctl_profile_state cur_profile_state;
	const char *algorithm; /* one of mrc_ctl_device_attr.cc.algorithms; NULL: no congestion control */
	const void *cc_config; /* the algorithm's parameters (struct mrc_ctl_cc_nscc_cfg for NSCC) */
	uint8_t vendor_cfg[MRC_CTL_MAX_VENDOR_CFG_SIZE];
};

/* Parameters of UET 1.0 NSCC ("uet-1.0-nscc"). Times in ns, sizes in bytes. */
struct mrc_ctl_cc_nscc_cfg {
	uint8_t disable_qa; /* non-zero: no quick adapt */
	uint32_t adjust_bytes_threshold;
	uint32_t adjust_period_threshold;
	uint32_t base_rtt;
	float eta;
	float fi;
	float fi_scale;
	float gamma;
	float max_md_jump;
	uint32_t max_cwnd;
	uint8_t qa_gate;
	uint32_t qa_threshold;
	uint32_t target_delay;
};

/* To OFFLINE needs ALGORITHM; to ONLINE needs CONFIG (unless the algorithm is NULL). */
int mrc_ctl_modify_cc_profile(struct mrc_context *mrc_ctx, uint64_t cc_profile_id,
			      struct mrc_ctl_cc_profile_attr *attr, int attr_mask);
/* With CONFIG, cc_config must point at a struct of the algorithm's type, which is filled in. */
int mrc_ctl_query_cc_profile(struct mrc_context *mrc_ctx, uint64_t cc_profile_id,
			     struct mrc_ctl_cc_profile_attr *attr, int attr_mask);

/* ---- EV events ------------------------------------------------------------------------------------- */

struct mrc_ctl_ev_event {
	uint64_t profile_id;
	struct mrc_ctl_ev ev;
	uint32_t drop_count; /* events lost before this one (exactly, or just non-zero; see opt_attr) */
#if MRC_CTL_API_VER_USED >= MRC_CTL_API_VER(1, 0, 1)
	enum mrc_ctl_ev_state state; /* the EV's new state */
#endif
};

/* A CQ that receives EV events instead of work completions (it never overruns). Like mrc_create_cq. */
struct mrc_cq *mrc_ctl_create_ev_event_cq(struct mrc_context *mrc_ctx, int cqe, void *cq_context,
					  struct mrc_comp_channel *channel, int comp_vector);
/* Up to num_entries events; returns how many, or a negative errno value. */
int mrc_ctl_poll_ev_event(struct mrc_cq *ev_cq, int num_entries, struct mrc_ctl_ev_event *ev_event);

/* ---- Endpoint operations (EV probes) --------------------------------------------------------------- */

enum mrc_ctl_ep_op_type {
	MRC_CTL_EP_OP_EV_PROBE,
	MRC_CTL_EP_OP_PORT_STATUS_UPDATE,
};

struct mrc_ctl_ep_req {
	uint16_t req_id; /* unique among outstanding requests */
	union ibv_gid sgid;
	union ibv_gid dgid;
	enum mrc_ctl_ev_fmt_mode ev_fmt_mode;
	struct mrc_ctl_ev req_ev; /* the path to probe */
	union {
		struct {
			uint32_t port_status; /* 1-based port bits */
		} port_status_update;
	} op;
};

struct mrc_ctl_ep_rsp {
	uint16_t req_id;
	uint8_t port;         /* where the answer arrived (1-based) */
	unsigned int rtt;     /* ns */
	uint8_t adj_svc_time; /* non-zero: rtt excludes the responder's service time */
};

/* Sends num_req requests of one type and waits up to rsp_timeout ns; *num_rsp answers land in rsp in arrival
 * order. Errors: EINVAL, EAGAIN, ENOMEM, ENOTSUP, ETIMEDOUT (some answers missing), EIO. */
int mrc_ctl_ep_batch_send_wait(struct mrc_context *mrc_ctx, uint8_t req_tc, enum mrc_ctl_ep_op_type op_type,
			       struct mrc_ctl_ep_req *req, int num_req, uint32_t rsp_timeout,
			       struct mrc_ctl_ep_rsp *rsp, int *num_rsp);

#ifdef __cplusplus
}
#endif

#endif /* _MRC_CTL_API_H_ */
