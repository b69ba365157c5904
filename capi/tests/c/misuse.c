/* The OCP MRC API from C, run by tests/misuse.rs: every call with NULL, foreign or stale objects, bad values
 * and out-of-order steps must fail with the documented convention and errno, never crash; and the objects that
 * need no data path work (version, device queries, contexts, channels, CQs, hints, the QP state machine,
 * controller profiles). Prints "ok NAME" or "FAIL NAME: ..." per check and "N failures"; exits with N.
 *
 *   misuse           under LD_PRELOAD=libmrc.so with MRC_SHIM_PLANES=2
 *   misuse foreign   a made-up verbs context is no MRC device
 *   misuse twocopies under LD_PRELOAD=libmrc_verbs_shim.so:libmrc.so: the shim's own library answers the verbs
 *                    calls, so its context is foreign to libmrc and refused with ENODEV, never used */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <infiniband/verbs.h>
#include <mrc.h>
#include <mrc_ctl.h>

static int failures;

static void check(int cond, const char *name, const char *detail)
{
	if (cond) {
		printf("ok %s\n", name);
	} else {
		printf("FAIL %s: %s (errno %d)\n", name, detail, errno);
		failures++;
	}
}

/* "0 / -1 with errno e". */
#define MINUS_ONE(call, e, name)                                                                           \
	do {                                                                                               \
		errno = 0;                                                                                 \
		int r_ = (call);                                                                           \
		check(r_ == -1 && errno == (e), name, "expected -1 with errno " #e);                       \
	} while (0)

/* "like verbs": the errno value returned (and errno set). */
#define RET(call, e, name)                                                                                 \
	do {                                                                                               \
		errno = 0;                                                                                 \
		int r_ = (call);                                                                           \
		check(r_ == (e) && ((e) == 0 || errno == (e)), name, "expected return " #e);               \
	} while (0)

/* NULL with errno e. */
#define NULL_WITH(call, e, name)                                                                           \
	do {                                                                                               \
		errno = 0;                                                                                 \
		void *p_ = (void *)(call);                                                                 \
		check(p_ == NULL && errno == (e), name, "expected NULL with errno " #e);                   \
	} while (0)

#define OK(call, name) check((call) == 0, name, "expected 0")

static void versions(void)
{
	uint32_t cur = 0, last = 0, vend = 0, lvend = 0;
	mrc_query_version(NULL, NULL, NULL, NULL);
	mrc_query_version(&cur, &last, &vend, &lvend);
	check(cur == MRC_API_CURRENT_VERSION && last == MRC_API_VER(1, 0, 0) &&
		      vend == MRC_VENDOR_API_CURRENT_VERSION,
	      "query_version", "unexpected versions");
	cur = 0;
	mrc_ctl_query_version(&cur, NULL, NULL, NULL);
	check(cur == MRC_CTL_API_CURRENT_VERSION, "ctl_query_version", "unexpected version");
}

/* A verbs context that is not libmrc's (`fake`: made up, or another library's) is no MRC device. */
static void foreign(struct ibv_context *fake)
{
	struct mrc_device_attr a;
	struct mrc_ctl_device_attr ca;
	int sup = 7;
	versions();
	OK(mrc_query_device(fake, &a, &sup), "foreign_query_device");
	check(sup == 0, "foreign_unsupported", "supported is not 0");
	NULL_WITH(mrc_create_context(fake, NULL), ENODEV, "foreign_create_context");
	MINUS_ONE(mrc_ctl_query_device(fake, &ca), EOPNOTSUPP, "foreign_ctl_query_device");
}

/* The first device's context, opened with ordinary verbs calls (NULL after a FAIL line). */
static struct ibv_context *open_first_device(void)
{
	int num = 0;
	struct ibv_device **list = ibv_get_device_list(&num);
	if (!list || num < 1) {
		printf("FAIL device_list: no device (is libmrc.so preloaded?)\n");
		return NULL;
	}
	struct ibv_context *ctx = ibv_open_device(list[0]);
	ibv_free_device_list(list);
	if (!ctx)
		printf("FAIL open_device: %s\n", strerror(errno));
	return ctx;
}

static int two_copies(void)
{
	struct ibv_context *ctx = open_first_device();
	if (!ctx)
		return 100;
	foreign(ctx);
	check(ibv_close_device(ctx) == 0, "two_copies_close_device", "ibv_close_device failed");
	printf("%d failures\n", failures);
	return failures;
}

/* A UDP-format (plain loopback) EV setup: format 13 with two 8-bit fields, explicit EV profile 1 with four
 * EVs over ports 1 and 2, CC profile 2 with NSCC; all ONLINE. Returns the EVs. */
static void controller_setup(struct mrc_context *m, struct mrc_ctl_ev evs[4])
{
	struct mrc_ctl_ev_fmt_field fields[2] = { { 8 }, { 8 } };
	struct mrc_ctl_ev_fmt_profile_attr f = { 0 };
	f.profile_state = MRC_CTL_PROFILE_OFFLINE;
	f.ev_fmt_mode = MRC_CTL_EV_FMT_MODE_STEV;
	MINUS_ONE(mrc_ctl_modify_ev_fmt_profile(m, 13, &f, MRC_CTL_EV_FMT_PROFILE_STATE | MRC_CTL_EV_FMT_PROFILE_MODE),
		  EINVAL, "fmt_stev_not_carried");
	f.ev_fmt_mode = MRC_CTL_EV_FMT_MODE_UDP;
	f.ev_fmt_op.op = MRC_CTL_EV_FMT_OP_MODIFY_FIELDS;
	f.ev_fmt_op.fmt_fields = NULL;
	f.ev_fmt_op.fmt_field_count = 2;
	MINUS_ONE(mrc_ctl_modify_ev_fmt_profile(m, 13, &f,
						MRC_CTL_EV_FMT_PROFILE_STATE | MRC_CTL_EV_FMT_PROFILE_MODE |
							MRC_CTL_EV_FMT_PROFILE_OP),
		  EINVAL, "fmt_null_fields");
	f.ev_fmt_op.fmt_fields = fields;
	OK(mrc_ctl_modify_ev_fmt_profile(m, 13, &f,
					 MRC_CTL_EV_FMT_PROFILE_STATE | MRC_CTL_EV_FMT_PROFILE_MODE |
						 MRC_CTL_EV_FMT_PROFILE_OP),
	   "fmt_offline");
	f = (struct mrc_ctl_ev_fmt_profile_attr){ .profile_state = MRC_CTL_PROFILE_ONLINE };
	OK(mrc_ctl_modify_ev_fmt_profile(m, 13, &f, MRC_CTL_EV_FMT_PROFILE_STATE), "fmt_online");

	struct mrc_ctl_ev_profile_attr e = { 0 };
	e.profile_state = MRC_CTL_PROFILE_OFFLINE;
	e.ev_mode = MRC_CTL_EV_MODE_EXP;
	e.ev_fmt_profile_id = 13;
	e.ev_count = 4;
	e.ev_min_active = 1;
	e.ev_event_mask = MRC_CTL_EV_GOOD | MRC_CTL_EV_ASSUMED_BAD;
	OK(mrc_ctl_modify_ev_profile(m, 1, &e,
				     MRC_CTL_EV_PROFILE_STATE | MRC_CTL_EV_PROFILE_MODE | MRC_CTL_EV_PROFILE_FMT_ID |
					     MRC_CTL_EV_PROFILE_COUNT | MRC_CTL_EV_PROFILE_MIN_ACTIVE |
					     MRC_CTL_EV_PROFILE_EVENT_MASK),
	   "ev_offline");
	struct mrc_ctl_ev_op_entry ent[4];
	memset(ent, 0, sizeof(ent));
	for (int i = 0; i < 4; i++) {
		uint32_t v = ((uint32_t)i << 8) | (uint32_t)i;
		ent[i].ev = MRC_CTL_EV_UNPOPULATED;
		memset(&ent[i].ev_new, 0, sizeof(ent[i].ev_new));
		memcpy(ent[i].ev_new.val, &v, sizeof(v));
		ent[i].ev_new.port = (uint8_t)(1 + i % 2);
		evs[i] = ent[i].ev_new;
	}
	e = (struct mrc_ctl_ev_profile_attr){ 0 };
	e.ev_op.op = MRC_CTL_EV_OP_REPLACE_EV;
	e.ev_op.entries = ent;
	e.ev_op.entry_count = 4;
	OK(mrc_ctl_modify_ev_profile(m, 1, &e, MRC_CTL_EV_PROFILE_EV_OP), "ev_replace_all");
	e = (struct mrc_ctl_ev_profile_attr){ .profile_state = MRC_CTL_PROFILE_ONLINE };
	OK(mrc_ctl_modify_ev_profile(m, 1, &e, MRC_CTL_EV_PROFILE_STATE), "ev_online");

	struct mrc_ctl_cc_nscc_cfg cfg = { .base_rtt = 10000, .target_delay = 7500, .eta = 0.15f, .fi = 1.0f,
					   .fi_scale = 1.0f, .gamma = 1.0f, .max_md_jump = 0.5f };
	struct mrc_ctl_cc_profile_attr c = { .profile_state = MRC_CTL_PROFILE_OFFLINE, .algorithm = "cubic" };
	MINUS_ONE(mrc_ctl_modify_cc_profile(m, 2, &c, MRC_CTL_CC_PROFILE_STATE | MRC_CTL_CC_PROFILE_ALGORITHM), EINVAL,
		  "cc_unknown_algorithm");
	c.algorithm = "uet-1.0-nscc";
	c.cc_config = &cfg;
	OK(mrc_ctl_modify_cc_profile(m, 2, &c,
				     MRC_CTL_CC_PROFILE_STATE | MRC_CTL_CC_PROFILE_ALGORITHM | MRC_CTL_CC_PROFILE_CONFIG),
	   "cc_offline");
	c = (struct mrc_ctl_cc_profile_attr){ .profile_state = MRC_CTL_PROFILE_ONLINE };
	OK(mrc_ctl_modify_cc_profile(m, 2, &c, MRC_CTL_CC_PROFILE_STATE), "cc_online");
	struct mrc_ctl_cc_nscc_cfg back = { 0 };
	c = (struct mrc_ctl_cc_profile_attr){ .cc_config = &back };
	OK(mrc_ctl_query_cc_profile(m, 2, &c, MRC_CTL_CC_PROFILE_ALGORITHM | MRC_CTL_CC_PROFILE_CONFIG), "cc_query");
	check(c.algorithm && strcmp(c.algorithm, "uet-1.0-nscc") == 0 && back.base_rtt == 10000 && back.gamma == 1.0f,
	      "cc_query_values", "unexpected configuration");
	c.cc_config = NULL;
	MINUS_ONE(mrc_ctl_query_cc_profile(m, 2, &c, MRC_CTL_CC_PROFILE_CONFIG), EINVAL, "cc_query_null_config");
}

int main(int argc, char **argv)
{
	if (argc > 1 && strcmp(argv[1], "foreign") == 0) {
		foreign((struct ibv_context *)&failures);
		printf("%d failures\n", failures);
		return failures;
	}
	if (argc > 1 && strcmp(argv[1], "twocopies") == 0)
		return two_copies();
	versions();

	int num = 0;
	struct ibv_context *ctx = open_first_device();
	if (!ctx)
		return 100;
	struct ibv_pd *pd = ibv_alloc_pd(ctx);
	struct ibv_context *foreign_ctx = (struct ibv_context *)&num;

	/* ---- device queries ---- */
	struct mrc_device_attr da;
	int sup = 0;
	MINUS_ONE(mrc_query_device(NULL, &da, &sup), EINVAL, "query_device_null_context");
	MINUS_ONE(mrc_query_device(ctx, NULL, &sup), EINVAL, "query_device_null_attr");
	MINUS_ONE(mrc_query_device(ctx, &da, NULL), EINVAL, "query_device_null_supported");
	OK(mrc_query_device(ctx, &da, &sup), "query_device");
	check(sup == 1 && da.mrc_protocol_version == MRC_PROTOCOL_VERSION_1 && da.qp_attr.max_qp_hint > 0 &&
		      da.mpr_attr.max_mpr > 0 && da.wimm_attr.max_wimm > 0 && (da.cap & MRC_DEVICE_CAP_TRIM_NACK),
	      "query_device_values", "unexpected attributes");
	sup = 7;
	OK(mrc_query_device(foreign_ctx, &da, &sup), "query_device_foreign");
	check(sup == 0, "query_device_foreign_unsupported", "a foreign context is MRC?");

	/* ---- contexts ---- */
	NULL_WITH(mrc_create_context(NULL, NULL), EINVAL, "create_context_null");
	NULL_WITH(mrc_create_context(foreign_ctx, NULL), ENODEV, "create_context_foreign");
	struct mrc_context_attr ca = { .mrc_api_version_used = MRC_API_VER(2, 0, 0) };
	NULL_WITH(mrc_create_context(ctx, &ca), EINVAL, "create_context_future_version");
	ca = (struct mrc_context_attr){ .mrc_api_version_used = MRC_API_CURRENT_VERSION };
	struct mrc_context *m = mrc_create_context(ctx, &ca);
	check(m != NULL, "create_context", "NULL");
	if (!m)
		return 100;
	/* ibv_close_device is not tried here: the shim closes a context with objects left as rdma-core does
	 * (it succeeds and the context leaves the shim's registry), which would take the device from libmrc. */
	OK(mrc_query_device_ex(ctx, m, &da, &sup), "query_device_ex");
	MINUS_ONE(mrc_query_device_ex(ctx, (struct mrc_context *)&num, &da, &sup), EINVAL,
		  "query_device_ex_foreign_mcontext");
	MINUS_ONE(mrc_destroy_context(NULL), EINVAL, "destroy_context_null");
	MINUS_ONE(mrc_destroy_context((struct mrc_context *)&num), EINVAL, "destroy_context_foreign");
	struct mrc_async_event ae;
	MINUS_ONE(mrc_get_async_event(NULL, &ae), EINVAL, "get_async_event_null_context");
	MINUS_ONE(mrc_get_async_event(m, NULL), EINVAL, "get_async_event_null_event");
	MINUS_ONE(mrc_get_async_event((struct mrc_context *)&num, &ae), EINVAL, "get_async_event_foreign_context");
	/* With the verbs context's async_fd non-blocking, an empty queue says EAGAIN instead of waiting. */
	fcntl(ctx->async_fd, F_SETFL, fcntl(ctx->async_fd, F_GETFL) | O_NONBLOCK);
	MINUS_ONE(mrc_get_async_event(m, &ae), EAGAIN, "get_async_event_nonblocking_empty");
	fcntl(ctx->async_fd, F_SETFL, fcntl(ctx->async_fd, F_GETFL) & ~O_NONBLOCK);
	errno = 0;
	mrc_ack_async_event(NULL);
	check(errno == EINVAL, "ack_async_event_null", "errno not EINVAL");

	/* ---- channels and CQs ---- */
	struct mrc_comp_channel *ch = NULL;
	MINUS_ONE(mrc_create_comp_channel(NULL, &ch), EINVAL, "create_channel_null_context");
	MINUS_ONE(mrc_create_comp_channel(m, NULL), EINVAL, "create_channel_null_out");
	OK(mrc_create_comp_channel(m, &ch), "create_channel");
	int fd = -1;
	MINUS_ONE(mrc_get_comp_channel_fd(ch, NULL), EINVAL, "channel_fd_null");
	MINUS_ONE(mrc_get_comp_channel_fd((struct mrc_comp_channel *)m, &fd), EINVAL, "channel_fd_wrong_kind");
	OK(mrc_get_comp_channel_fd(ch, &fd), "channel_fd");
	check(fd >= 0 && fcntl(fd, F_GETFD) >= 0, "channel_fd_valid", "not an open fd");
	NULL_WITH(mrc_create_cq(NULL, 16, NULL, NULL, 0), EINVAL, "create_cq_null_context");
	NULL_WITH(mrc_create_cq(m, 0, NULL, NULL, 0), EINVAL, "create_cq_zero_cqe");
	NULL_WITH(mrc_create_cq(m, -5, NULL, NULL, 0), EINVAL, "create_cq_negative_cqe");
	NULL_WITH(mrc_create_cq(m, 16, NULL, NULL, 1), EINVAL, "create_cq_bad_vector");
	NULL_WITH(mrc_create_cq(m, 16, NULL, (struct mrc_comp_channel *)&num, 0), EINVAL, "create_cq_foreign_channel");
	struct mrc_cq *cq = mrc_create_cq(m, 64, &num, ch, 0);
	check(cq != NULL, "create_cq", "NULL");
	RET(mrc_destroy_comp_channel(ch), EBUSY, "destroy_channel_with_cq");
	RET(mrc_req_notify_cq(NULL, 0), EINVAL, "req_notify_null");
	RET(mrc_req_notify_cq(cq, 0), 0, "req_notify");
	fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
	struct mrc_cq *evcq_out = NULL;
	void *cq_ctx = NULL;
	MINUS_ONE(mrc_get_cq_event(ch, &evcq_out, &cq_ctx), EAGAIN, "get_cq_event_nonblocking_empty");
	MINUS_ONE(mrc_get_cq_event(NULL, &evcq_out, &cq_ctx), EINVAL, "get_cq_event_null_channel");
	MINUS_ONE(mrc_get_cq_event(ch, NULL, &cq_ctx), EINVAL, "get_cq_event_null_cq");
	errno = 0;
	mrc_ack_cq_events(cq, 1);
	check(errno == EINVAL, "ack_more_cq_events_than_got", "errno not EINVAL");
	struct ibv_wc wc[4];
	MINUS_ONE(mrc_poll_cq(NULL, 4, wc), EINVAL, "poll_cq_null");
	MINUS_ONE(mrc_poll_cq(cq, -1, wc), EINVAL, "poll_cq_negative");
	MINUS_ONE(mrc_poll_cq(cq, 4, NULL), EINVAL, "poll_cq_null_wc");
	check(mrc_poll_cq(cq, 4, wc) == 0, "poll_cq_empty", "not 0");
	struct mrc_cq *evcq = mrc_ctl_create_ev_event_cq(m, 64, NULL, NULL, 0);
	check(evcq != NULL, "create_ev_event_cq", "NULL");
	struct mrc_ctl_ev_event evs_out[2];
	MINUS_ONE(mrc_poll_cq(evcq, 4, wc), EINVAL, "poll_cq_on_ev_cq");
	check(mrc_ctl_poll_ev_event(cq, 2, evs_out) == -EINVAL, "poll_ev_event_on_work_cq", "not -EINVAL");
	check(mrc_ctl_poll_ev_event(NULL, 2, evs_out) == -EINVAL, "poll_ev_event_null", "not -EINVAL");
	check(mrc_ctl_poll_ev_event(evcq, 2, evs_out) >= 0, "poll_ev_event", "negative");

	/* ---- hints ---- */
	NULL_WITH(mrc_create_qp_hint(m, NULL), EINVAL, "create_hint_null_attr");
	struct mrc_qp_hint_init_attr hi = { .attr = { .num_qps_per_peer = 2, .num_send_peers = -1 } };
	NULL_WITH(mrc_create_qp_hint(m, &hi), EINVAL, "create_hint_negative");
	hi.attr.num_send_peers = 8;
	struct mrc_qp_hint *hint = mrc_create_qp_hint(m, &hi);
	check(hint != NULL, "create_hint", "NULL");
	struct mrc_qp_hint_attr ha = { 0 };
	MINUS_ONE(mrc_query_qp_hint(hint, &ha, 1 << 9), EINVAL, "query_hint_bad_mask");
	MINUS_ONE(mrc_query_qp_hint(hint, NULL, MRC_QP_HINT_NUM_SEND_PEERS), EINVAL, "query_hint_null_attr");
	OK(mrc_query_qp_hint(hint, &ha, MRC_QP_HINT_NUM_QPS_PER_PEER | MRC_QP_HINT_NUM_SEND_PEERS), "query_hint");
	check(ha.num_qps_per_peer == 2 && ha.num_send_peers == 8, "query_hint_values", "unexpected values");
	ha.vendor_cfg[0] = 1;
	MINUS_ONE(mrc_modify_qp_hint(hint, &ha, MRC_QP_HINT_VENDOR_CFG), EINVAL, "modify_hint_vendor_cfg");
	ha.num_remote_recv_peers = 16;
	OK(mrc_modify_qp_hint(hint, &ha, MRC_QP_HINT_NUM_REMOTE_RECV_PEERS), "modify_hint");

	/* ---- QPs ---- */
	struct mrc_qp_init_attr qa = { .send_cq = cq, .recv_cq = cq, .pd = pd, .sq_sig_all = 1,
				       .cap = { .max_send_wr = 64, .max_recv_wr = 64, .max_send_sge = 1,
						.max_recv_sge = 1 },
				       .send_ops_flags = IBV_QP_EX_WITH_RDMA_WRITE | IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM };
	struct mrc_qp_init_attr bad = qa;
	NULL_WITH(mrc_create_qp(m, NULL), EINVAL, "create_qp_null_attr");
	NULL_WITH(mrc_create_qp(NULL, &qa), EINVAL, "create_qp_null_context");
	bad.send_cq = NULL;
	NULL_WITH(mrc_create_qp(m, &bad), EINVAL, "create_qp_null_cq");
	bad = qa;
	bad.send_cq = evcq;
	NULL_WITH(mrc_create_qp(m, &bad), EINVAL, "create_qp_ev_cq");
	bad = qa;
	bad.pd = NULL;
	NULL_WITH(mrc_create_qp(m, &bad), EINVAL, "create_qp_null_pd");
	bad.pd = (struct ibv_pd *)&num;
	NULL_WITH(mrc_create_qp(m, &bad), EINVAL, "create_qp_foreign_pd");
	bad = qa;
	bad.send_ops_flags = IBV_QP_EX_WITH_SEND;
	NULL_WITH(mrc_create_qp(m, &bad), EINVAL, "create_qp_send_op");
	bad = qa;
	bad.cap.max_send_wr = 1 << 30;
	NULL_WITH(mrc_create_qp(m, &bad), EINVAL, "create_qp_too_deep");
	bad = qa;
	bad.protocol_version = (enum mrc_protocol_version)2;
	NULL_WITH(mrc_create_qp(m, &bad), EINVAL, "create_qp_protocol");
	struct mrc_qp *qp = mrc_create_qp(m, &qa);
	check(qp != NULL, "create_qp", "NULL");
	if (!qp)
		return 100;
	RET(ibv_dealloc_pd(pd), EBUSY, "dealloc_pd_with_qp");
	RET(mrc_destroy_cq(cq), EBUSY, "destroy_cq_with_qp");
	MINUS_ONE(mrc_destroy_context(m), EBUSY, "destroy_context_with_objects");
	uint32_t qpn = 0;
	MINUS_ONE(mrc_get_qpn(qp, NULL), EINVAL, "get_qpn_null");
	MINUS_ONE(mrc_get_qpn((struct mrc_qp *)cq, &qpn), EINVAL, "get_qpn_wrong_kind");
	OK(mrc_get_qpn(qp, &qpn), "get_qpn");
	check(qpn > 0 && qpn <= 0xffffff, "qpn_range", "QPN outside 24 bits");

	struct ibv_send_wr swr = { 0 }, *bad_swr = NULL;
	struct ibv_recv_wr rwr = { 0 }, *bad_rwr = NULL;
	RET(mrc_post_send(qp, &swr, &bad_swr), EINVAL, "post_send_in_reset");
	check(bad_swr == &swr, "post_send_bad_wr", "bad_wr is not the first WR");
	MINUS_ONE(mrc_post_recv(qp, &rwr, &bad_rwr), EINVAL, "post_recv_in_reset");
	RET(mrc_post_send(qp, &swr, NULL), EINVAL, "post_send_null_bad_wr");

	struct ibv_qp_attr va = { .qp_state = IBV_QPS_RTR };
	struct mrc_qp_attr ma;
	memset(&ma, 0, sizeof(ma));
	RET(mrc_modify_qp(qp, &va, IBV_QP_STATE, NULL, 0), EINVAL, "modify_reset_to_rtr");
	va.qp_state = IBV_QPS_INIT;
	/* IBV_QP_PORT is taken (and ignored) only for the device's one port. */
	RET(mrc_modify_qp(qp, &va, IBV_QP_STATE | IBV_QP_PORT, NULL, 0), EINVAL, "modify_port_0_refused");
	RET(mrc_modify_qp(qp, &va, IBV_QP_STATE | IBV_QP_ALT_PATH, NULL, 0), EINVAL, "modify_alt_path_refused");
	RET(mrc_modify_qp(qp, NULL, IBV_QP_STATE, NULL, 0), EINVAL, "modify_null_vattr");
	RET(mrc_modify_qp(qp, &va, IBV_QP_STATE, NULL, MRC_QP_EV_PROFILE_ID), EINVAL, "modify_null_mrc_attr");
	ma.profile.ev_profile_id = 1;
	ma.profile.cc_profile_id = 2;
	ma.qp_hint = hint;
	RET(mrc_modify_qp(qp, &va, IBV_QP_STATE, &ma, MRC_QP_EV_PROFILE_ID), EINVAL, "modify_profile_not_online");

	struct mrc_ctl_ev evs[4];
	controller_setup(m, evs);

	RET(mrc_modify_qp(qp, &va, IBV_QP_STATE, &ma, MRC_QP_EV_PROFILE_ID | MRC_QP_CC_PROFILE_ID | MRC_QP_HINT), 0,
	    "modify_to_init");
	MINUS_ONE(mrc_destroy_qp_hint(hint), EBUSY, "destroy_hint_with_qp");
	struct mrc_ctl_ev_profile_attr e = { .profile_state = MRC_CTL_PROFILE_OFFLINE };
	MINUS_ONE(mrc_ctl_modify_ev_profile(m, 1, &e, MRC_CTL_EV_PROFILE_STATE), EBUSY, "ev_profile_offline_with_qp");
	OK(mrc_post_recv(qp, &rwr, &bad_rwr), "post_recv_in_init");

	va = (struct ibv_qp_attr){ .qp_state = IBV_QPS_RTR, .path_mtu = IBV_MTU_4096, .dest_qp_num = qpn, .rq_psn = 0 };
	va.ah_attr.is_global = 1;
	va.ah_attr.port_num = 1;
	/* The QP talks to itself: the peer is this device (GID 0, port 1's LID), as the shim names it. */
	struct ibv_port_attr port_attr;
	OK(ibv_query_port(ctx, 1, &port_attr), "query_own_port");
	va.ah_attr.dlid = port_attr.lid;
	OK(ibv_query_gid(ctx, 1, 0, &va.ah_attr.grh.dgid), "query_own_gid");
	union ibv_gid own_gid = va.ah_attr.grh.dgid;
	memset(&ma, 0, sizeof(ma));
	ma.mpr.mpr_dest = 8;
	ma.wimm.max_wimm_dest = 128;
	int rtr = IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN;
	RET(mrc_modify_qp(qp, &va, rtr & ~IBV_QP_AV, &ma, 0), EINVAL, "modify_rtr_without_av");
	RET(mrc_modify_qp(qp, &va, rtr, &ma, MRC_QP_TIMEOUT), EINVAL, "modify_rtr_timeout_not_here");
	RET(mrc_modify_qp(qp, &va, rtr, &ma, MRC_QP_MPR_DEST | MRC_QP_MAX_WIMM_DEST), 0, "modify_to_rtr");
	va = (struct ibv_qp_attr){ .qp_state = IBV_QPS_RTS, .sq_psn = 0 };
	memset(&ma, 0, sizeof(ma));
	ma.timeout = 30;
	RET(mrc_modify_qp(qp, &va, IBV_QP_STATE | IBV_QP_SQ_PSN, &ma, MRC_QP_TIMEOUT), EINVAL, "modify_rts_bad_timeout");
	ma.timeout = 8;
	ma.retry.linear_cnt = 7;
	ma.retry.exp_cnt = 25;
	ma.mpr.mpr = 8;
	ma.wimm.max_wimm = 128;
	RET(mrc_modify_qp(qp, &va, IBV_QP_STATE | IBV_QP_SQ_PSN, &ma,
			  MRC_QP_TIMEOUT | MRC_QP_RETRY_CNT | MRC_QP_MPR | MRC_QP_MAX_WIMM),
	    0, "modify_to_rts");

	struct ibv_qp_attr qv;
	struct mrc_qp_attr qm;
	struct mrc_qp_init_attr qi;
	memset(&qm, 0, sizeof(qm));
	RET(mrc_query_qp(qp, NULL, IBV_QP_STATE, NULL, 0, NULL), EINVAL, "query_qp_null_vattr");
	RET(mrc_query_qp(qp, &qv, IBV_QP_STATE | IBV_QP_DEST_QPN, &qm,
			 MRC_QP_TIMEOUT | MRC_QP_RETRY_CNT | MRC_QP_EV_PROFILE_ID | MRC_QP_CC_PROFILE_ID | MRC_QP_HINT |
				 MRC_QP_MPR_DEST,
			 &qi),
	    0, "query_qp");
	check(qv.qp_state == IBV_QPS_RTS && qv.dest_qp_num == qpn && qm.timeout == 8 && qm.retry.exp_cnt == 25 &&
		      qm.profile.ev_profile_id == 1 && qm.profile.cc_profile_id == 2 && qm.qp_hint == hint &&
		      qm.mpr.mpr_dest == 8 && qi.send_cq == cq && qi.pd == pd && qi.cap.max_send_wr == 64,
	      "query_qp_values", "unexpected attributes");
	RET(mrc_post_send(qp, &swr, &bad_swr), 0, "post_send_in_rts");

	/* ---- controller: DENY, ports, probes, device ---- */
	struct mrc_ctl_ev_op_entry ent = { .ev = evs[2], .state = MRC_CTL_EV_DENIED };
	e = (struct mrc_ctl_ev_profile_attr){ 0 };
	e.ev_op.op = MRC_CTL_EV_OP_MODIFY_EV_STATE;
	e.ev_op.entries = &ent;
	e.ev_op.entry_count = 1;
	OK(mrc_ctl_modify_ev_profile(m, 1, &e, MRC_CTL_EV_PROFILE_EV_OP), "deny_ev");
	struct mrc_ctl_ev_op_entry arr[4];
	memset(arr, 0, sizeof(arr));
	e.ev_op.op = MRC_CTL_EV_OP_QUERY_EV_ARRAY;
	e.ev_op.entries = arr;
	e.ev_op.entry_count = 2;
	MINUS_ONE(mrc_ctl_query_ev_profile(m, 1, &e, MRC_CTL_EV_PROFILE_EV_OP), E2BIG, "query_ev_array_short");
	check(e.ev_op.entry_count == 4, "query_ev_array_needed", "entry_count not 4");
	OK(mrc_ctl_query_ev_profile(m, 1, &e, MRC_CTL_EV_PROFILE_EV_OP | MRC_CTL_EV_PROFILE_COUNT), "query_ev_array");
	check(e.ev_count == 4 && arr[2].state == MRC_CTL_EV_DENIED && arr[1].state == MRC_CTL_EV_GOOD &&
		      memcmp(&arr[3].ev, &evs[3], sizeof(evs[3])) == 0,
	      "query_ev_array_values", "unexpected EVs or states");
	ent.state = MRC_CTL_EV_ASSUMED_BAD;
	e.ev_op.op = MRC_CTL_EV_OP_MODIFY_EV_STATE;
	e.ev_op.entries = &ent;
	e.ev_op.entry_count = 1;
	MINUS_ONE(mrc_ctl_modify_ev_profile(m, 1, &e, MRC_CTL_EV_PROFILE_EV_OP), EINVAL, "assumed_bad_refused");
	MINUS_ONE(mrc_ctl_modify_ev_profile(m, 1, NULL, MRC_CTL_EV_PROFILE_EV_OP), EINVAL, "modify_ev_null_attr");
	MINUS_ONE(mrc_ctl_modify_ev_profile(m, 1, &e, MRC_CTL_EV_PROFILE_EV_OP | MRC_CTL_EV_PROFILE_EV_FIELDS_OP),
		  EINVAL, "ev_op_and_fields_op");

	struct mrc_ctl_port_attr pa = { 0 };
	OK(mrc_ctl_query_port(m, 1, &pa, MRC_CTL_PORT_ADMIN_STATE), "query_port");
	check(pa.port_admin_state == MRC_CTL_PORT_ADMIN_ENABLED, "port_enabled", "not enabled");
	MINUS_ONE(mrc_ctl_query_port(m, 3, &pa, MRC_CTL_PORT_ADMIN_STATE), EINVAL, "query_port_beyond_planes");
	MINUS_ONE(mrc_ctl_query_port(m, 0, &pa, MRC_CTL_PORT_ADMIN_STATE), EINVAL, "query_port_zero");
	pa.port_admin_state = (enum mrc_ctl_port_admin_state)5;
	MINUS_ONE(mrc_ctl_modify_port(m, 2, &pa, MRC_CTL_PORT_ADMIN_STATE), EINVAL, "modify_port_bad_state");
	pa.port_admin_state = MRC_CTL_PORT_ADMIN_DISABLED;
	OK(mrc_ctl_modify_port(m, 2, &pa, MRC_CTL_PORT_ADMIN_STATE), "disable_port");
	pa.port_admin_state = MRC_CTL_PORT_ADMIN_ENABLED;
	OK(mrc_ctl_query_port(m, 2, &pa, MRC_CTL_PORT_ADMIN_STATE), "query_disabled_port");
	check(pa.port_admin_state == MRC_CTL_PORT_ADMIN_DISABLED, "port_disabled", "not disabled");

	struct mrc_ctl_ep_req req;
	struct mrc_ctl_ep_rsp rsp[1];
	int nrsp = -1;
	memset(&req, 0, sizeof(req));
	req.req_id = 1;
	req.ev_fmt_mode = MRC_CTL_EV_FMT_MODE_UDP;
	req.req_ev = evs[0];
	MINUS_ONE(mrc_ctl_ep_batch_send_wait(m, 0, MRC_CTL_EP_OP_EV_PROBE, &req, 1, 1000000, rsp, NULL), EINVAL,
		  "probe_null_num_rsp");
	MINUS_ONE(mrc_ctl_ep_batch_send_wait(m, 0, MRC_CTL_EP_OP_EV_PROBE, &req, 0, 1000000, rsp, &nrsp), EINVAL,
		  "probe_no_requests");
	req.req_ev.port = 9;
	MINUS_ONE(mrc_ctl_ep_batch_send_wait(m, 0, MRC_CTL_EP_OP_EV_PROBE, &req, 1, 1000000, rsp, &nrsp), EINVAL,
		  "probe_bad_port");
	req.req_ev.port = 1;
	MINUS_ONE(mrc_ctl_ep_batch_send_wait(m, 0, MRC_CTL_EP_OP_EV_PROBE, &req, 1, 1000000, rsp, &nrsp), EINVAL,
		  "probe_unknown_peer");
	check(nrsp == 0, "probe_no_answers", "num_rsp not 0");
	memcpy(&req.dgid, &own_gid, sizeof(req.dgid));
	OK(mrc_ctl_ep_batch_send_wait(m, 0, MRC_CTL_EP_OP_EV_PROBE, &req, 1, 2000000000u, rsp, &nrsp), "probe_self");
	check(nrsp == 1 && rsp[0].req_id == 1 && rsp[0].rtt > 0, "probe_rtt", "no answer with an RTT");
	/* PORT_STATUS_UPDATE: the mask names ports of the device (1-based bits), at least one, and the one the
	 * report travels on. */
	req.op.port_status_update.port_status = 0;
	MINUS_ONE(mrc_ctl_ep_batch_send_wait(m, 0, MRC_CTL_EP_OP_PORT_STATUS_UPDATE, &req, 1, 1000000, rsp, &nrsp),
		  EINVAL, "port_status_zero");
	req.op.port_status_update.port_status = 0x1;
	MINUS_ONE(mrc_ctl_ep_batch_send_wait(m, 0, MRC_CTL_EP_OP_PORT_STATUS_UPDATE, &req, 1, 1000000, rsp, &nrsp),
		  EINVAL, "port_status_bit_0");
	req.op.port_status_update.port_status = 0x2 | 0x8;
	MINUS_ONE(mrc_ctl_ep_batch_send_wait(m, 0, MRC_CTL_EP_OP_PORT_STATUS_UPDATE, &req, 1, 1000000, rsp, &nrsp),
		  EINVAL, "port_status_no_such_port");
	req.op.port_status_update.port_status = 0x4;
	MINUS_ONE(mrc_ctl_ep_batch_send_wait(m, 0, MRC_CTL_EP_OP_PORT_STATUS_UPDATE, &req, 1, 1000000, rsp, &nrsp),
		  EINVAL, "port_status_calls_its_port_down");
	MINUS_ONE(mrc_ctl_ep_batch_send_wait(m, 0, MRC_CTL_EP_OP_PORT_STATUS_UPDATE, NULL, 1, 1000000, rsp, &nrsp),
		  EINVAL, "port_status_null_req");
	MINUS_ONE(mrc_ctl_ep_batch_send_wait(m, 0, (enum mrc_ctl_ep_op_type)7, &req, 1, 1000000, rsp, &nrsp), EINVAL,
		  "ep_bad_op_type");
	/* Port 2 is disabled: report port 1 up only, to ourselves. */
	req.op.port_status_update.port_status = 0x2;
	OK(mrc_ctl_ep_batch_send_wait(m, 0, MRC_CTL_EP_OP_PORT_STATUS_UPDATE, &req, 1, 2000000000u, rsp, &nrsp),
	   "port_status_self");
	check(nrsp == 1 && rsp[0].req_id == 1 && rsp[0].rtt > 0 && rsp[0].port == 1, "port_status_answer",
	      "no answer with an RTT");

	struct mrc_ctl_device_attr cda;
	MINUS_ONE(mrc_ctl_query_device(ctx, NULL), EINVAL, "ctl_query_device_null");
	MINUS_ONE(mrc_ctl_query_device(foreign_ctx, &cda), EOPNOTSUPP, "ctl_query_device_foreign");
	OK(mrc_ctl_query_device(ctx, &cda), "ctl_query_device");
	check(cda.phy_port_mask == 0x6 && cda.ev.ev_fmt_mode_mask == MRC_CTL_EV_FMT_MODE_UDP &&
		      (cda.ev.ev_mode_mask & MRC_CTL_EV_MODE_EXP) && cda.ev.ev_free_count == cda.ev.ev_max_count - 4 &&
		      cda.cc.algorithms && cda.cc.algorithms[0] && strcmp(cda.cc.algorithms[0], "uet-1.0-nscc") == 0 &&
		      cda.cc.algorithms[1] == NULL,
	      "ctl_query_device_values", "unexpected attributes");
	sup = 7;
	OK(mrc_ctl_query_device_ex(foreign_ctx, NULL, &cda, &sup), "ctl_query_device_ex_foreign");
	check(sup == 0, "ctl_query_device_ex_unsupported", "supported is not 0");

	/* ---- teardown, with double destroys ---- */
	RET(mrc_destroy_qp(qp), 0, "destroy_qp");
	RET(mrc_destroy_qp(qp), EINVAL, "destroy_qp_twice");
	e = (struct mrc_ctl_ev_profile_attr){ .profile_state = MRC_CTL_PROFILE_OFFLINE };
	OK(mrc_ctl_modify_ev_profile(m, 1, &e, MRC_CTL_EV_PROFILE_STATE), "ev_profile_offline_after_qp");
	OK(mrc_destroy_qp_hint(hint), "destroy_hint");
	MINUS_ONE(mrc_destroy_qp_hint(hint), EINVAL, "destroy_hint_twice");
	RET(mrc_destroy_cq(cq), 0, "destroy_cq");
	RET(mrc_destroy_cq(evcq), 0, "destroy_ev_cq");
	RET(mrc_destroy_cq(cq), EINVAL, "destroy_cq_twice");
	RET(mrc_destroy_comp_channel(ch), 0, "destroy_channel");
	OK(mrc_destroy_context(m), "destroy_context");
	MINUS_ONE(mrc_destroy_context(m), EINVAL, "destroy_context_twice");
	RET(ibv_dealloc_pd(pd), 0, "dealloc_pd");
	RET(ibv_close_device(ctx), 0, "close_device");

	printf("%d failures\n", failures);
	return failures;
}
