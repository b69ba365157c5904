/* The controller API over the transport (tests/controller.rs): two QPs of one device connected to each other
 * with an explicit EV profile; a DENY of an EV in the middle of a stream of WRITEs (the stream completes and
 * every byte arrives); EV events when a port (plane) is disabled; EV probes answering with an RTT per EV.
 * Prints "ok <name>" per check and "<n> failures". */
#define _GNU_SOURCE
#include <errno.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <infiniband/verbs.h>
#include <mrc_ctl.h>

#include "ctl_common.h"

#define MSG (256 * 1024)
#define MSGS 32

static struct mrc_qp *make_qp(struct mrc_context *m, struct mrc_cq *cq, struct ibv_pd *pd)
{
	struct mrc_qp_init_attr qi = { 0 };
	qi.send_cq = cq;
	qi.recv_cq = cq;
	qi.cap.max_send_wr = 64;
	qi.cap.max_recv_wr = 64;
	qi.cap.max_send_sge = 1;
	qi.cap.max_recv_sge = 1;
	qi.pd = pd;
	struct mrc_qp *qp = mrc_create_qp(m, &qi);
	check(qp != NULL, "create_qp", "NULL");
	struct ibv_qp_attr va = { .qp_state = IBV_QPS_INIT, .qp_access_flags = IBV_ACCESS_REMOTE_WRITE };
	struct mrc_qp_attr ma = { 0 };
	ma.profile.ev_profile_id = 1;
	OK(mrc_modify_qp(qp, &va, IBV_QP_STATE | IBV_QP_ACCESS_FLAGS, &ma, MRC_QP_EV_PROFILE_ID), "qp_init");
	return qp;
}

static void connect_to(struct mrc_qp *qp, uint32_t peer, uint16_t lid, union ibv_gid gid)
{
	struct ibv_qp_attr va = { 0 };
	struct mrc_qp_attr ma = { 0 };
	va.qp_state = IBV_QPS_RTR;
	va.path_mtu = IBV_MTU_4096;
	va.dest_qp_num = peer;
	va.ah_attr.is_global = 1;
	va.ah_attr.port_num = 1;
	va.ah_attr.dlid = lid;
	va.ah_attr.grh.dgid = gid;
	OK(mrc_modify_qp(qp, &va, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN, &ma,
			 0),
	   "qp_rtr");
	va = (struct ibv_qp_attr){ .qp_state = IBV_QPS_RTS };
	OK(mrc_modify_qp(qp, &va, IBV_QP_STATE | IBV_QP_SQ_PSN, &ma, 0), "qp_rts");
}

static double now_s(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* EV events until `want` of them name port `port`, or 10 s. */
static int events_on_port(struct mrc_cq *evcq, uint8_t port, enum mrc_ctl_ev_state state, int want)
{
	int seen = 0;
	double t0 = now_s();
	while (seen < want && now_s() - t0 < 10) {
		struct mrc_ctl_ev_event ev[8];
		int n = mrc_ctl_poll_ev_event(evcq, 8, ev);
		if (n < 0) {
			errno = -n;
			return -1;
		}
		for (int i = 0; i < n; i++) {
			printf("event: profile %llu port %u val %u state %#x\n", (unsigned long long)ev[i].profile_id,
			       ev[i].ev.port, ev[i].ev.val[0] | ev[i].ev.val[1] << 8, ev[i].state);
			if (ev[i].profile_id == 1 && ev[i].ev.port == port && ev[i].state == state)
				seen++;
		}
	}
	return seen;
}

int main(void)
{
	int n = 0;
	struct ibv_device **list = ibv_get_device_list(&n);
	if (!list || n < 1) {
		printf("no device\n1 failures\n");
		return 1;
	}
	struct ibv_context *ctx = ibv_open_device(list[0]);
	ibv_free_device_list(list);
	struct ibv_pd *pd = ibv_alloc_pd(ctx);
	struct mrc_context *m = mrc_create_context(ctx, NULL);
	check(m != NULL, "create_context", "NULL");
	struct mrc_ctl_device_attr da;
	OK(mrc_ctl_query_device(ctx, &da), "ctl_query_device");
	check((da.opt_attr & MRC_CTL_OPT_CAP_EV_EVENT) && (da.opt_attr & MRC_CTL_OPT_CAP_EP_OP_EV_PROBE), "ctl_caps",
	      "EV events or probes not advertised");
	profiles(m);
	struct mrc_comp_channel *ch = NULL;
	OK(mrc_create_comp_channel(m, &ch), "create_channel");
	int tag = 0;
	struct mrc_cq *cq = mrc_create_cq(m, 1024, &tag, ch, 0);
	struct mrc_cq *evcq = mrc_ctl_create_ev_event_cq(m, 256, NULL, NULL, 0);
	check(cq && evcq, "create_cqs", "NULL");
	struct mrc_qp *a = make_qp(m, cq, pd), *b = make_qp(m, cq, pd);
	uint32_t qa = 0, qb = 0;
	OK(mrc_get_qpn(a, &qa), "qpn_a");
	OK(mrc_get_qpn(b, &qb), "qpn_b");
	struct ibv_port_attr pa;
	union ibv_gid gid;
	OK(ibv_query_port(ctx, 1, &pa), "query_port");
	OK(ibv_query_gid(ctx, 1, 0, &gid), "query_gid");
	connect_to(a, qb, pa.lid, gid);
	connect_to(b, qa, pa.lid, gid);

	/* ---- probes: an RTT per EV ---- */
	struct mrc_ctl_ep_req req[EVS];
	struct mrc_ctl_ep_rsp rsp[EVS];
	memset(req, 0, sizeof(req));
	for (int i = 0; i < EVS; i++) {
		req[i].req_id = (uint16_t)(10 + i);
		req[i].ev_fmt_mode = MRC_CTL_EV_FMT_MODE_UDP;
		req[i].req_ev = evs[i];
		memcpy(&req[i].dgid, &gid, sizeof(gid));
	}
	int nrsp = 0;
	OK(mrc_ctl_ep_batch_send_wait(m, 0, MRC_CTL_EP_OP_EV_PROBE, req, EVS, 2000000000u, rsp, &nrsp), "probe_all");
	check(nrsp == EVS, "probe_answers", "not one answer per EV");
	int ids = 0;
	for (int i = 0; i < nrsp; i++) {
		printf("probe: req %u port %u rtt %u ns\n", rsp[i].req_id, rsp[i].port, rsp[i].rtt);
		if (rsp[i].req_id >= 10 && rsp[i].req_id < 10 + EVS && rsp[i].rtt > 0 &&
		    rsp[i].port == req[rsp[i].req_id - 10].req_ev.port)
			ids |= 1 << (rsp[i].req_id - 10);
	}
	check(ids == (1 << EVS) - 1, "probe_rtt_per_ev", "an EV without an RTT");

	/* ---- DENY in the middle of a stream of WRITEs ---- */
	/* Message k has bytes of its own and a place of its own, so a message lost or misplaced after the DENY
	 * shows (the same bytes to the same place every time would hide it). */
	const size_t total = (size_t)MSG * MSGS;
	uint8_t *src = malloc(total), *dst = calloc(1, total);
	for (size_t k = 0; k < MSGS; k++)
		for (size_t i = 0; i < MSG; i++)
			src[k * MSG + i] = (uint8_t)(i * 13 + 7 + k * 101);
	struct ibv_mr *ms = ibv_reg_mr(pd, src, total, IBV_ACCESS_LOCAL_WRITE);
	struct ibv_mr *md = ibv_reg_mr(pd, dst, total, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
	check(ms && md, "reg_mr", "NULL");
	int posted = 0, done = 0, denied = 0, errors = 0;
	double t0 = now_s();
	while (done < MSGS && now_s() - t0 < 30) {
		while (posted < MSGS && posted - done < 8) {
			size_t at = (size_t)posted * MSG;
			struct ibv_sge sge = { .addr = (uintptr_t)(src + at), .length = MSG, .lkey = ms->lkey };
			struct ibv_send_wr wr = { 0 }, *bad = NULL;
			wr.wr_id = (uint64_t)posted;
			wr.sg_list = &sge;
			wr.num_sge = 1;
			wr.opcode = IBV_WR_RDMA_WRITE;
			wr.send_flags = IBV_SEND_SIGNALED;
			wr.wr.rdma.remote_addr = (uintptr_t)(dst + at);
			wr.wr.rdma.rkey = md->rkey;
			if (mrc_post_send(a, &wr, &bad))
				break;
			posted++;
		}
		struct ibv_wc wc[8];
		int k = mrc_poll_cq(cq, 8, wc);
		for (int i = 0; i < k; i++)
			errors += wc[i].status != IBV_WC_SUCCESS;
		done += k > 0 ? k : 0;
		if (!denied && done >= MSGS / 4) {
			struct mrc_ctl_ev_op_entry ent = { .ev = evs[0], .state = MRC_CTL_EV_DENIED };
			struct mrc_ctl_ev_profile_attr e = { 0 };
			e.ev_op.op = MRC_CTL_EV_OP_MODIFY_EV_STATE;
			e.ev_op.entries = &ent;
			e.ev_op.entry_count = 1;
			OK(mrc_ctl_modify_ev_profile(m, 1, &e, MRC_CTL_EV_PROFILE_EV_OP), "deny_mid_transfer");
			denied = 1;
		}
	}
	check(done == MSGS && errors == 0 && denied, "writes_complete_after_deny", "the stream did not finish");
	int wrong = -1;
	for (int k = MSGS - 1; k >= 0; k--)
		if (memcmp(src + (size_t)k * MSG, dst + (size_t)k * MSG, MSG) != 0)
			wrong = k;
	if (wrong >= 0)
		printf("message %d of %d: wrong bytes\n", wrong, MSGS);
	check(wrong < 0, "bytes_after_deny", "a message's bytes are wrong (see above)");
	/* ---- the completion channel: an armed CQ makes the fd readable on its next completion ---- */
	int fd = -1;
	OK(mrc_get_comp_channel_fd(ch, &fd), "channel_fd");
	OK(mrc_req_notify_cq(cq, 0), "req_notify");
	{
		struct ibv_sge sge = { .addr = (uintptr_t)src, .length = 64, .lkey = ms->lkey };
		struct ibv_send_wr wr = { 0 }, *bad = NULL;
		wr.wr_id = 999;
		wr.sg_list = &sge;
		wr.num_sge = 1;
		wr.opcode = IBV_WR_RDMA_WRITE;
		wr.send_flags = IBV_SEND_SIGNALED;
		wr.wr.rdma.remote_addr = (uintptr_t)dst;
		wr.wr.rdma.rkey = md->rkey;
		OK(mrc_post_send(a, &wr, &bad), "post_for_event");
	}
	struct pollfd pfd = { .fd = fd, .events = POLLIN };
	check(poll(&pfd, 1, 10000) == 1, "channel_readable", "no event within 10 s");
	struct mrc_cq *ev_cq = NULL;
	void *ev_ctx = NULL;
	OK(mrc_get_cq_event(ch, &ev_cq, &ev_ctx), "get_cq_event");
	check(ev_cq == cq && ev_ctx == &tag, "cq_event_names_the_cq", "wrong CQ or context");
	mrc_ack_cq_events(cq, 1);
	{
		struct ibv_wc wc;
		int got = 0;
		double t1 = now_s();
		while (got == 0 && now_s() - t1 < 10)
			got = mrc_poll_cq(cq, 1, &wc);
		check(got == 1 && wc.wr_id == 999 && wc.status == IBV_WC_SUCCESS, "event_completion", "not polled");
	}

	/* The denied EV is still denied in the profile. */
	struct mrc_ctl_ev_op_entry q = { .ev = evs[0] };
	struct mrc_ctl_ev_profile_attr e = { 0 };
	e.ev_op.op = MRC_CTL_EV_OP_QUERY_EV_STATE;
	e.ev_op.entries = &q;
	e.ev_op.entry_count = 1;
	OK(mrc_ctl_query_ev_profile(m, 1, &e, MRC_CTL_EV_PROFILE_EV_OP), "query_denied");
	check(q.state == MRC_CTL_EV_DENIED, "still_denied", "not DENIED");

	/* ---- a disabled port (plane) raises an EV event per EV of each QP on it ---- */
	while (mrc_ctl_poll_ev_event(evcq, 8, (struct mrc_ctl_ev_event[8]){ 0 }) > 0)
		;
	struct mrc_ctl_port_attr port = { .port_admin_state = MRC_CTL_PORT_ADMIN_DISABLED };
	OK(mrc_ctl_modify_port(m, 2, &port, MRC_CTL_PORT_ADMIN_STATE), "disable_port_2");
	/* Two QPs × two EVs on port 2. */
	check(events_on_port(evcq, 2, MRC_CTL_EV_ASSUMED_BAD, 4) == 4, "events_port_down", "missing events");
	port.port_admin_state = MRC_CTL_PORT_ADMIN_ENABLED;
	OK(mrc_ctl_modify_port(m, 2, &port, MRC_CTL_PORT_ADMIN_STATE), "enable_port_2");
	check(events_on_port(evcq, 2, MRC_CTL_EV_GOOD, 4) == 4, "events_port_up", "missing events");

	OK(mrc_destroy_qp(a), "destroy_a");
	OK(mrc_destroy_qp(b), "destroy_b");
	ibv_dereg_mr(ms);
	ibv_dereg_mr(md);
	OK(mrc_destroy_cq(cq), "destroy_cq");
	OK(mrc_destroy_cq(evcq), "destroy_evcq");
	check(mrc_destroy_comp_channel(ch) == 0, "destroy_channel", "not 0");
	OK(mrc_destroy_context(m), "destroy_context");
	ibv_dealloc_pd(pd);
	ibv_close_device(ctx);
	free(src);
	free(dst);
	printf("%d failures\n", failures);
	return failures ? 1 : 0;
}
