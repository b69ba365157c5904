/* Asynchronous events and EV events from C (tests/events.rs). Two QPs of one device connected to each other.
 *
 * - async: with the verbs context's async_fd non-blocking, mrc_get_async_event says EAGAIN while nothing is
 *   queued; a CQ overrun (more signalled WRITEs than the send CQ holds, never polled) raises IBV_EVENT_CQ_ERR
 *   naming that CQ and IBV_EVENT_QP_FATAL naming the QP; in blocking mode the call waits for them to arrive;
 *   disabling and enabling port 2 raise IBV_EVENT_PORT_ERR and IBV_EVENT_PORT_ACTIVE with port_num 2.
 * Prints "ok <name>" per check and "<n> failures". */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <infiniband/verbs.h>
#include <mrc_ctl.h>

#include "ctl_common.h"

static struct ibv_context *ctx;
static struct ibv_pd *pd;
static struct ibv_port_attr pa;
static union ibv_gid gid;

static struct mrc_qp *make_qp(struct mrc_context *m, struct mrc_cq *scq, struct mrc_cq *rcq, uint64_t profile)
{
	struct mrc_qp_init_attr qi = { 0 };
	qi.send_cq = scq;
	qi.recv_cq = rcq;
	qi.cap.max_send_wr = 64;
	qi.cap.max_recv_wr = 64;
	qi.cap.max_send_sge = 1;
	qi.cap.max_recv_sge = 1;
	qi.pd = pd;
	struct mrc_qp *qp = mrc_create_qp(m, &qi);
	check(qp != NULL, "create_qp", "NULL");
	struct ibv_qp_attr va = { .qp_state = IBV_QPS_INIT, .qp_access_flags = IBV_ACCESS_REMOTE_WRITE };
	struct mrc_qp_attr ma = { 0 };
	ma.profile.ev_profile_id = profile;
	OK(mrc_modify_qp(qp, &va, IBV_QP_STATE | IBV_QP_ACCESS_FLAGS, &ma, profile ? MRC_QP_EV_PROFILE_ID : 0),
	   "qp_init");
	return qp;
}

static void connect_to(struct mrc_qp *qp, struct mrc_qp *peer)
{
	uint32_t pn = 0;
	OK(mrc_get_qpn(peer, &pn), "peer_qpn");
	struct ibv_qp_attr va = { 0 };
	struct mrc_qp_attr ma = { 0 };
	va.qp_state = IBV_QPS_RTR;
	va.path_mtu = IBV_MTU_4096;
	va.dest_qp_num = pn;
	va.ah_attr.is_global = 1;
	va.ah_attr.port_num = 1;
	va.ah_attr.dlid = pa.lid;
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

static void set_nonblocking(int on)
{
	int fl = fcntl(ctx->async_fd, F_GETFL);
	fcntl(ctx->async_fd, F_SETFL, on ? fl | O_NONBLOCK : fl & ~O_NONBLOCK);
}

static const char *type_name(enum ibv_event_type t)
{
	switch (t) {
	case IBV_EVENT_CQ_ERR:
		return "CQ_ERR";
	case IBV_EVENT_QP_FATAL:
		return "QP_FATAL";
	case IBV_EVENT_PORT_ACTIVE:
		return "PORT_ACTIVE";
	case IBV_EVENT_PORT_ERR:
		return "PORT_ERR";
	default:
		return "other";
	}
}

/* Blocking: each call waits until an event is there (alarm() ends a hung test). */
static int next_event(struct mrc_context *m, struct mrc_async_event *e)
{
	alarm(20);
	int rc = mrc_get_async_event(m, e);
	alarm(0);
	if (rc == 0) {
		printf("async event: %s", type_name(e->event_type));
		if (e->event_type == IBV_EVENT_PORT_ERR || e->event_type == IBV_EVENT_PORT_ACTIVE)
			printf(" port %d\n", e->element.port_num);
		else
			printf(" element %p\n", (void *)e->element.qp);
	}
	return rc;
}

static void async_events(struct mrc_context *m)
{
	struct mrc_async_event e;
	/* A second context on the same device: QP and CQ events go to the owner's context, port events to both. */
	struct mrc_context *m2 = mrc_create_context(ctx, NULL);
	check(m2 != NULL, "create_second_context", "NULL");
	/* Non-blocking: nothing is queued yet. */
	set_nonblocking(1);
	check(mrc_get_async_event(m, &e) == -1 && errno == EAGAIN, "async_nonblocking_empty", "not -1/EAGAIN");

	/* A send CQ of 4 entries, never polled, under 32 signalled WRITEs: it overruns. */
	struct mrc_cq *small = mrc_create_cq(m, 4, NULL, NULL, 0);
	struct mrc_cq *big = mrc_create_cq(m, 256, NULL, NULL, 0);
	check(small && big, "create_cqs", "NULL");
	struct mrc_qp *a = make_qp(m, small, big, 0), *b = make_qp(m, big, big, 0);
	connect_to(a, b);
	connect_to(b, a);
	static uint8_t src[4096], dst[4096];
	struct ibv_mr *ms = ibv_reg_mr(pd, src, sizeof(src), IBV_ACCESS_LOCAL_WRITE);
	struct ibv_mr *md = ibv_reg_mr(pd, dst, sizeof(dst), IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
	check(ms && md, "reg_mr", "NULL");
	int posted = 0;
	for (int i = 0; i < 32; i++) {
		struct ibv_sge sge = { .addr = (uintptr_t)src, .length = 64, .lkey = ms->lkey };
		struct ibv_send_wr wr = { 0 }, *bad = NULL;
		wr.wr_id = (uint64_t)i;
		wr.sg_list = &sge;
		wr.num_sge = 1;
		wr.opcode = IBV_WR_RDMA_WRITE;
		wr.send_flags = IBV_SEND_SIGNALED;
		wr.wr.rdma.remote_addr = (uintptr_t)dst;
		wr.wr.rdma.rkey = md->rkey;
		if (mrc_post_send(a, &wr, &bad) == 0)
			posted++;
	}
	check(posted == 32, "post_32_writes", "a post failed");

	/* Blocking: the events arrive on the transport's time; the call waits for each. */
	set_nonblocking(0);
	int cq_err = 0, qp_fatal = 0, other = 0;
	double t0 = now_s();
	while ((!cq_err || !qp_fatal) && now_s() - t0 < 15) {
		if (next_event(m, &e) != 0)
			break;
		if (e.event_type == IBV_EVENT_CQ_ERR && e.element.cq == small)
			cq_err++;
		else if (e.event_type == IBV_EVENT_QP_FATAL && e.element.qp == a)
			qp_fatal++;
		else
			other++;
		mrc_ack_async_event(&e);
	}
	check(cq_err == 1, "cq_err_names_the_overrun_cq", "no IBV_EVENT_CQ_ERR for the small CQ");
	check(qp_fatal == 1, "qp_fatal_names_the_qp", "no IBV_EVENT_QP_FATAL for the QP");
	check(other == 0, "no_other_events", "an event for another object");
	struct ibv_qp_attr qa;
	OK(mrc_query_qp(a, &qa, IBV_QP_STATE, NULL, 0, NULL), "query_failed_qp");
	check(qa.qp_state == IBV_QPS_ERR, "failed_qp_in_err", "not IBV_QPS_ERR");

	/* A peer in ERR: the WRITE toward it fails the sender (a NACK or its retries running out, short ones
	 * here), which raises IBV_EVENT_QP_FATAL for the sender. */
	{
		struct mrc_cq *cq2 = mrc_create_cq(m, 256, NULL, NULL, 0);
		struct mrc_qp *c = make_qp(m, cq2, cq2, 0), *d = make_qp(m, cq2, cq2, 0);
		connect_to(d, c);
		uint32_t dn = 0;
		OK(mrc_get_qpn(d, &dn), "qpn_d");
		struct ibv_qp_attr va = { 0 };
		struct mrc_qp_attr ma = { 0 };
		va.qp_state = IBV_QPS_RTR;
		va.path_mtu = IBV_MTU_4096;
		va.dest_qp_num = dn;
		va.ah_attr.is_global = 1;
		va.ah_attr.port_num = 1;
		va.ah_attr.dlid = pa.lid;
		va.ah_attr.grh.dgid = gid;
		OK(mrc_modify_qp(c, &va, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN,
				 &ma, 0),
		   "c_rtr");
		va = (struct ibv_qp_attr){ .qp_state = IBV_QPS_RTS };
		ma.timeout = 8;
		ma.retry.linear_cnt = 1;
		ma.retry.exp_cnt = 0;
		OK(mrc_modify_qp(c, &va, IBV_QP_STATE | IBV_QP_SQ_PSN, &ma, MRC_QP_TIMEOUT | MRC_QP_RETRY_CNT), "c_rts");
		va = (struct ibv_qp_attr){ .qp_state = IBV_QPS_ERR };
		OK(mrc_modify_qp(d, &va, IBV_QP_STATE, NULL, 0), "peer_to_err");
		struct ibv_sge sge = { .addr = (uintptr_t)src, .length = 64, .lkey = ms->lkey };
		struct ibv_send_wr wr = { 0 }, *bad = NULL;
		wr.wr_id = 77;
		wr.sg_list = &sge;
		wr.num_sge = 1;
		wr.opcode = IBV_WR_RDMA_WRITE;
		wr.send_flags = IBV_SEND_SIGNALED;
		wr.wr.rdma.remote_addr = (uintptr_t)dst;
		wr.wr.rdma.rkey = md->rkey;
		OK(mrc_post_send(c, &wr, &bad), "post_to_failed_peer");
		int fatal_c = 0, fatal_d = 0;
		t0 = now_s();
		while (!fatal_c && now_s() - t0 < 15) {
			if (next_event(m, &e) != 0)
				break;
			fatal_c += e.event_type == IBV_EVENT_QP_FATAL && e.element.qp == c;
			fatal_d += e.event_type == IBV_EVENT_QP_FATAL && e.element.qp == d;
			mrc_ack_async_event(&e);
		}
		check(fatal_c == 1, "qp_fatal_when_the_peer_failed", "no IBV_EVENT_QP_FATAL for the sender");
		/* The application moved d to ERR itself: no fatal event for that, as in verbs. */
		check(fatal_d == 0, "no_fatal_for_a_requested_err", "IBV_EVENT_QP_FATAL for the QP moved to ERR");
		struct ibv_wc wc;
		int got = 0;
		t0 = now_s();
		while (got == 0 && now_s() - t0 < 10)
			got = mrc_poll_cq(cq2, 1, &wc);
		printf("sender's completion: wr %llu status %d\n", (unsigned long long)wc.wr_id, wc.status);
		check(got == 1 && wc.wr_id == 77 && wc.status != IBV_WC_SUCCESS, "failed_write_completes_in_error",
		      "no error completion");
		OK(mrc_destroy_qp(c), "destroy_c");
		OK(mrc_destroy_qp(d), "destroy_d");
		OK(mrc_destroy_cq(cq2), "destroy_cq2");
	}

	/* Ports (planes): disabling and enabling port 2 raise PORT_ERR and PORT_ACTIVE naming it. */
	struct mrc_ctl_port_attr port = { .port_admin_state = MRC_CTL_PORT_ADMIN_DISABLED };
	OK(mrc_ctl_modify_port(m, 2, &port, MRC_CTL_PORT_ADMIN_STATE), "disable_port_2");
	check(next_event(m, &e) == 0 && e.event_type == IBV_EVENT_PORT_ERR && e.element.port_num == 2,
	      "port_err_names_port_2", "wrong event");
	mrc_ack_async_event(&e);
	port.port_admin_state = MRC_CTL_PORT_ADMIN_ENABLED;
	OK(mrc_ctl_modify_port(m, 2, &port, MRC_CTL_PORT_ADMIN_STATE), "enable_port_2");
	check(next_event(m, &e) == 0 && e.event_type == IBV_EVENT_PORT_ACTIVE && e.element.port_num == 2,
	      "port_active_names_port_2", "wrong event");
	mrc_ack_async_event(&e);

	/* Drained: non-blocking says EAGAIN again. */
	set_nonblocking(1);
	check(mrc_get_async_event(m, &e) == -1 && errno == EAGAIN, "async_drained", "not -1/EAGAIN");
	/* The other context on the device saw the port events (waited for: they reach each context in turn), and
	 * nothing else: not the QP and CQ events of this one's objects. */
	set_nonblocking(0);
	int ports2 = 0;
	for (int i = 0; i < 2; i++) {
		ports2 += next_event(m2, &e) == 0 &&
			  (e.event_type == IBV_EVENT_PORT_ERR || e.event_type == IBV_EVENT_PORT_ACTIVE) &&
			  e.element.port_num == 2;
		mrc_ack_async_event(&e);
	}
	set_nonblocking(1);
	check(ports2 == 2 && mrc_get_async_event(m2, &e) == -1 && errno == EAGAIN, "other_context_gets_port_events_only",
	      "wrong events on the second context");
	set_nonblocking(0);
	OK(mrc_destroy_context(m2), "destroy_second_context");

	OK(mrc_destroy_qp(a), "destroy_a");
	OK(mrc_destroy_qp(b), "destroy_b");
	ibv_dereg_mr(ms);
	ibv_dereg_mr(md);
	OK(mrc_destroy_cq(small), "destroy_small");
	OK(mrc_destroy_cq(big), "destroy_big");
}

/* Polls `cq` until `want` events of port `port` in `state` were seen (or 10 s); returns how many, and the
 * drop_count of each in `drops` (up to 8). */
static int collect(struct mrc_cq *cq, uint8_t port, enum mrc_ctl_ev_state state, int want, uint32_t *drops)
{
	int seen = 0;
	double t0 = now_s();
	while (seen < want && now_s() - t0 < 10) {
		struct mrc_ctl_ev_event ev[8];
		int n = mrc_ctl_poll_ev_event(cq, 8, ev);
		if (n < 0) {
			errno = -n;
			return -1;
		}
		for (int i = 0; i < n; i++) {
			printf("ev event: profile %llu port %u val %u state %#x drop_count %u\n",
			       (unsigned long long)ev[i].profile_id, ev[i].ev.port, ev[i].ev.val[0] | ev[i].ev.val[1] << 8,
			       ev[i].state, ev[i].drop_count);
			if (ev[i].profile_id == 1 && ev[i].ev.port == port && ev[i].state == state) {
				if (drops && seen < 8)
					drops[seen] = ev[i].drop_count;
				seen++;
			}
		}
	}
	return seen;
}

/* EV-event CQs: an armed one signals its channel when an EV event arrives; one too small for the events drops
 * the rest and the next event that gets in carries the count. */
static void ev_event_cqs(struct mrc_context *m)
{
	struct mrc_ctl_device_attr da;
	OK(mrc_ctl_query_device(ctx, &da), "ctl_query_device");
	check(da.opt_attr & MRC_CTL_OPT_CAP_EV_EVENT_PRECISE_DROP_CNT, "precise_drop_count_advertised", "not set");
	struct mrc_comp_channel *ch = NULL;
	OK(mrc_create_comp_channel(m, &ch), "create_channel");
	int fd = -1;
	OK(mrc_get_comp_channel_fd(ch, &fd), "channel_fd");
	/* The small CQ first: each batch of events reaches it before the big one. */
	struct mrc_cq *small = mrc_ctl_create_ev_event_cq(m, 2, NULL, NULL, 0);
	int tag = 0;
	struct mrc_cq *big = mrc_ctl_create_ev_event_cq(m, 64, &tag, ch, 0);
	struct mrc_cq *wcq = mrc_create_cq(m, 256, NULL, NULL, 0);
	check(small && big && wcq, "create_ev_cqs", "NULL");
	struct mrc_qp *a = make_qp(m, wcq, wcq, 1), *b = make_qp(m, wcq, wcq, 1);
	connect_to(a, b);
	connect_to(b, a);

	/* Armed: nothing yet, so the channel is quiet. */
	OK(mrc_req_notify_cq(big, 0), "arm_ev_cq");
	struct pollfd pfd = { .fd = fd, .events = POLLIN };
	check(poll(&pfd, 1, 0) == 0, "channel_quiet_before", "readable without an event");

	/* Kill plane 2: two QPs x two EVs on it go ASSUMED_BAD; the channel becomes readable. */
	struct mrc_ctl_port_attr port = { .port_admin_state = MRC_CTL_PORT_ADMIN_DISABLED };
	OK(mrc_ctl_modify_port(m, 2, &port, MRC_CTL_PORT_ADMIN_STATE), "kill_plane_2");
	check(poll(&pfd, 1, 10000) == 1, "ev_channel_readable", "no event within 10 s");
	struct mrc_cq *got = NULL;
	void *got_ctx = NULL;
	OK(mrc_get_cq_event(ch, &got, &got_ctx), "ev_get_cq_event");
	check(got == big && got_ctx == &tag, "ev_cq_event_names_the_cq", "wrong CQ or context");
	mrc_ack_cq_events(big, 1);
	uint32_t drops[8] = { 0 };
	check(collect(big, 2, MRC_CTL_EV_ASSUMED_BAD, 4, drops) == 4, "ev_events_plane_down", "missing events");
	check(drops[0] == 0 && drops[3] == 0, "big_cq_drops_nothing", "drop_count set");
	/* Disarmed after one event: the channel stays quiet. */
	check(poll(&pfd, 1, 0) == 0, "channel_quiet_after", "readable again without arming");

	/* The small CQ took two of the four and dropped two; none of those in it carries a count yet. */
	int n2 = collect(small, 2, MRC_CTL_EV_ASSUMED_BAD, 2, drops);
	check(n2 == 2 && drops[0] == 0 && drops[1] == 0, "small_cq_holds_two", "not two events without drops");
	struct mrc_ctl_ev_event extra[4];
	check(mrc_ctl_poll_ev_event(small, 4, extra) == 0, "small_cq_dropped_the_rest", "more than its cqe");

	/* Plane 2 back: four GOOD events; the first one into the small CQ says two were dropped before it. */
	port.port_admin_state = MRC_CTL_PORT_ADMIN_ENABLED;
	OK(mrc_ctl_modify_port(m, 2, &port, MRC_CTL_PORT_ADMIN_STATE), "plane_2_back");
	check(collect(big, 2, MRC_CTL_EV_GOOD, 4, NULL) == 4, "ev_events_plane_up", "missing events");
	memset(drops, 0, sizeof(drops));
	n2 = collect(small, 2, MRC_CTL_EV_GOOD, 2, drops);
	printf("small CQ after plane up: %d events, drop_count %u %u\n", n2, drops[0], drops[1]);
	check(n2 == 2 && drops[0] == 2 && drops[1] == 0, "drop_count_counts_dropped_events",
	      "the first event after the drops does not say 2");

	OK(mrc_destroy_qp(a), "destroy_ev_a");
	OK(mrc_destroy_qp(b), "destroy_ev_b");
	OK(mrc_destroy_cq(small), "destroy_small_ev_cq");
	OK(mrc_destroy_cq(big), "destroy_big_ev_cq");
	OK(mrc_destroy_cq(wcq), "destroy_wcq");
	OK(mrc_destroy_comp_channel(ch), "destroy_channel");
}

static uint32_t val_of(const struct mrc_ctl_ev *e)
{
	uint32_t v;
	memcpy(&v, e->val, sizeof(v));
	return v;
}

/* REPLACE_EV on the profile of live QPs: the QPs take the new EV in the old one's place (the plane's EV events
 * name it, not the old one) and the traffic goes on. */
static void replace_live(struct mrc_context *m)
{
	struct mrc_cq *evcq = mrc_ctl_create_ev_event_cq(m, 64, NULL, NULL, 0);
	struct mrc_cq *wcq = mrc_create_cq(m, 256, NULL, NULL, 0);
	check(evcq && wcq, "replace_cqs", "NULL");
	struct mrc_qp *a = make_qp(m, wcq, wcq, 1), *b = make_qp(m, wcq, wcq, 1);
	connect_to(a, b);
	connect_to(b, a);

	/* Slot 1 holds EV 1001 on port 2: it becomes 1101 on port 2. */
	struct mrc_ctl_ev_op_entry ent = { 0 };
	ent.ev = evs[1];
	ent.ev_new = evs[1];
	uint32_t nv = 1101;
	memcpy(ent.ev_new.val, &nv, sizeof(nv));
	struct mrc_ctl_ev_profile_attr e = { 0 };
	e.ev_op.op = MRC_CTL_EV_OP_REPLACE_EV;
	e.ev_op.entries = &ent;
	e.ev_op.entry_count = 1;
	OK(mrc_ctl_modify_ev_profile(m, 1, &e, MRC_CTL_EV_PROFILE_EV_OP), "replace_ev_on_live_qps");

	/* WRITEs go on over the new set, every byte arrives. */
	enum { LEN = 64 * 1024, N = 16 };
	uint8_t *src = malloc(LEN), *dst = calloc(1, LEN);
	for (int i = 0; i < LEN; i++)
		src[i] = (uint8_t)(i * 7 + 3);
	struct ibv_mr *ms = ibv_reg_mr(pd, src, LEN, IBV_ACCESS_LOCAL_WRITE);
	struct ibv_mr *md = ibv_reg_mr(pd, dst, LEN, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
	int done = 0, errors = 0;
	for (int i = 0; i < N; i++) {
		struct ibv_sge sge = { .addr = (uintptr_t)src, .length = LEN, .lkey = ms->lkey };
		struct ibv_send_wr wr = { 0 }, *bad = NULL;
		wr.wr_id = (uint64_t)i;
		wr.sg_list = &sge;
		wr.num_sge = 1;
		wr.opcode = IBV_WR_RDMA_WRITE;
		wr.send_flags = IBV_SEND_SIGNALED;
		wr.wr.rdma.remote_addr = (uintptr_t)dst;
		wr.wr.rdma.rkey = md->rkey;
		OK(mrc_post_send(a, &wr, &bad), "replace_post");
	}
	double t0 = now_s();
	while (done < N && now_s() - t0 < 20) {
		struct ibv_wc wc[8];
		int k = mrc_poll_cq(wcq, 8, wc);
		for (int i = 0; i < k; i++)
			errors += wc[i].status != IBV_WC_SUCCESS;
		done += k > 0 ? k : 0;
	}
	check(done == N && errors == 0 && memcmp(src, dst, LEN) == 0, "writes_after_replace", "not all done");

	/* Plane 2 dies: each QP's EVs on it are 1101 and 1003 now, not 1001. */
	while (mrc_ctl_poll_ev_event(evcq, 8, (struct mrc_ctl_ev_event[8]){ 0 }) > 0)
		;
	struct mrc_ctl_port_attr port = { .port_admin_state = MRC_CTL_PORT_ADMIN_DISABLED };
	OK(mrc_ctl_modify_port(m, 2, &port, MRC_CTL_PORT_ADMIN_STATE), "replace_kill_plane_2");
	int new_seen = 0, old_seen = 0, seen = 0;
	t0 = now_s();
	while (seen < 4 && now_s() - t0 < 10) {
		struct mrc_ctl_ev_event ev[8];
		int n = mrc_ctl_poll_ev_event(evcq, 8, ev);
		for (int i = 0; i < n; i++) {
			printf("after replace: port %u val %u state %#x\n", ev[i].ev.port, val_of(&ev[i].ev), ev[i].state);
			if (ev[i].ev.port != 2 || ev[i].state != MRC_CTL_EV_ASSUMED_BAD)
				continue;
			seen++;
			new_seen += val_of(&ev[i].ev) == 1101;
			old_seen += val_of(&ev[i].ev) == 1001;
		}
	}
	check(seen == 4 && new_seen == 2 && old_seen == 0, "live_qps_use_the_replaced_ev",
	      "the plane's events do not name the new EV on both QPs");
	port.port_admin_state = MRC_CTL_PORT_ADMIN_ENABLED;
	OK(mrc_ctl_modify_port(m, 2, &port, MRC_CTL_PORT_ADMIN_STATE), "replace_plane_2_back");

	OK(mrc_destroy_qp(a), "replace_destroy_a");
	OK(mrc_destroy_qp(b), "replace_destroy_b");
	ibv_dereg_mr(ms);
	ibv_dereg_mr(md);
	free(src);
	free(dst);
	OK(mrc_destroy_cq(evcq), "replace_destroy_evcq");
	OK(mrc_destroy_cq(wcq), "replace_destroy_wcq");
}

/* WRITEs of n x 64 KiB from a into b's memory, polled on cq; returns whether all completed and verified. */
static int writes(struct mrc_qp *a, struct mrc_cq *cq, int n)
{
	enum { LEN = 64 * 1024 };
	uint8_t *src = malloc(LEN), *dst = calloc(1, LEN);
	for (int i = 0; i < LEN; i++)
		src[i] = (uint8_t)(i * 5 + n);
	struct ibv_mr *ms = ibv_reg_mr(pd, src, LEN, IBV_ACCESS_LOCAL_WRITE);
	struct ibv_mr *md = ibv_reg_mr(pd, dst, LEN, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
	int posted = 0, done = 0, errors = 0;
	double t0 = now_s();
	while (done < n && now_s() - t0 < 20) {
		while (posted < n && posted - done < 8) {
			struct ibv_sge sge = { .addr = (uintptr_t)src, .length = LEN, .lkey = ms->lkey };
			struct ibv_send_wr wr = { 0 }, *bad = NULL;
			wr.wr_id = (uint64_t)posted;
			wr.sg_list = &sge;
			wr.num_sge = 1;
			wr.opcode = IBV_WR_RDMA_WRITE;
			wr.send_flags = IBV_SEND_SIGNALED;
			wr.wr.rdma.remote_addr = (uintptr_t)dst;
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
	}
	int ok = done == n && errors == 0 && memcmp(src, dst, LEN) == 0;
	ibv_dereg_mr(ms);
	ibv_dereg_mr(md);
	free(src);
	free(dst);
	return ok;
}

/* PORT_STATUS_UPDATE: a report to the peer that only port 1 is up, on an EV of port 1, is answered with an RTT
 * and the port; traffic goes on while it stands (the peer keeps off plane 2: mrc-host's control tests count
 * the packets); a report with both ports up restores plane 2. */
static void port_status_update(struct mrc_context *m)
{
	struct mrc_cq *wcq = mrc_create_cq(m, 256, NULL, NULL, 0);
	struct mrc_qp *a = make_qp(m, wcq, wcq, 1), *b = make_qp(m, wcq, wcq, 1);
	connect_to(a, b);
	connect_to(b, a);
	struct mrc_ctl_ep_req req[2];
	struct mrc_ctl_ep_rsp rsp[2];
	memset(req, 0, sizeof(req));
	for (int i = 0; i < 2; i++) {
		req[i].req_id = (uint16_t)(40 + i);
		req[i].ev_fmt_mode = MRC_CTL_EV_FMT_MODE_UDP;
		memcpy(&req[i].dgid, &gid, sizeof(gid));
	}
	req[0].req_ev = evs[0]; /* port 1 */
	req[0].op.port_status_update.port_status = 1u << 1;
	req[1].req_ev = evs[2]; /* port 1 too */
	req[1].op.port_status_update.port_status = 1u << 1;
	int nrsp = 0;
	OK(mrc_ctl_ep_batch_send_wait(m, 0, MRC_CTL_EP_OP_PORT_STATUS_UPDATE, req, 2, 2000000000u, rsp, &nrsp),
	   "port_status_update_port_2_down");
	int answered = 0;
	for (int i = 0; i < nrsp; i++) {
		printf("port status: req %u port %u rtt %u ns\n", rsp[i].req_id, rsp[i].port, rsp[i].rtt);
		answered += (rsp[i].req_id == 40 || rsp[i].req_id == 41) && rsp[i].rtt > 0 && rsp[i].port == 1;
	}
	check(nrsp == 2 && answered == 2, "port_status_answers", "not an answer with an RTT per report");
	check(writes(a, wcq, 16), "writes_while_port_2_reported_down", "WRITEs failed");
	/* Both up again, reported on port 2. */
	req[0].req_ev = evs[1];
	req[0].op.port_status_update.port_status = (1u << 1) | (1u << 2);
	OK(mrc_ctl_ep_batch_send_wait(m, 0, MRC_CTL_EP_OP_PORT_STATUS_UPDATE, req, 1, 2000000000u, rsp, &nrsp),
	   "port_status_update_both_up");
	check(nrsp == 1 && rsp[0].port == 2 && rsp[0].rtt > 0, "port_status_answer_port_2", "no answer");
	check(writes(a, wcq, 16), "writes_after_port_status_restored", "WRITEs failed");
	OK(mrc_destroy_qp(a), "ps_destroy_a");
	OK(mrc_destroy_qp(b), "ps_destroy_b");
	OK(mrc_destroy_cq(wcq), "ps_destroy_wcq");
}

int main(int argc, char **argv)
{
	(void)argc;
	(void)argv;
	int n = 0;
	struct ibv_device **list = ibv_get_device_list(&n);
	if (!list || n < 1) {
		printf("no device\n1 failures\n");
		return 1;
	}
	ctx = ibv_open_device(list[0]);
	ibv_free_device_list(list);
	pd = ibv_alloc_pd(ctx);
	OK(ibv_query_port(ctx, 1, &pa), "query_port");
	OK(ibv_query_gid(ctx, 1, 0, &gid), "query_gid");
	struct mrc_context *m = mrc_create_context(ctx, NULL);
	check(m != NULL, "create_context", "NULL");
	profiles(m);

	async_events(m);
	ev_event_cqs(m);
	port_status_update(m);
	replace_live(m);

	OK(mrc_destroy_context(m), "destroy_context");
	ibv_dealloc_pd(pd);
	ibv_close_device(ctx);
	printf("%d failures\n", failures);
	return failures ? 1 : 0;
}
