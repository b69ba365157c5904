/* The RTS timeout and retry count, run under LD_PRELOAD=libmrc_verbs_shim.so by tests/retry.rs: ibv_query_qp
 * returns the values set, and a QP whose peer vanishes (its QP destroyed: nothing answers) completes its WRITE
 * with IBV_WC_RETRY_EXC_ERR and goes to ERR, no sooner than retry_cnt + 1 timeouts of 4.096 us x 2^timeout.
 * Prints one line per check ("ok NAME" or "FAIL NAME: ..."); the exit status is the number of failed checks. */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <infiniband/verbs.h>

#include "check.h"

#define TIMEOUT 8 /* 4.096 us x 2^8 = 1.05 ms */
#define RETRY_CNT 3

static struct ibv_qp *make_qp(struct ibv_pd *pd, struct ibv_cq *cq)
{
	struct ibv_qp_init_attr ia;
	memset(&ia, 0, sizeof ia);
	ia.send_cq = cq;
	ia.recv_cq = cq;
	ia.qp_type = IBV_QPT_RC;
	ia.cap.max_send_wr = 16;
	ia.cap.max_recv_wr = 16;
	ia.cap.max_send_sge = 1;
	ia.cap.max_recv_sge = 1;
	return ibv_create_qp(pd, &ia);
}

static int to_init(struct ibv_qp *qp)
{
	struct ibv_qp_attr a;
	memset(&a, 0, sizeof a);
	a.qp_state = IBV_QPS_INIT;
	a.port_num = 1;
	a.qp_access_flags = IBV_ACCESS_REMOTE_WRITE;
	return ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS);
}

static int to_rtr(struct ibv_qp *qp, const union ibv_gid *gid, uint16_t lid, uint32_t dest_qpn)
{
	struct ibv_qp_attr a;
	memset(&a, 0, sizeof a);
	a.qp_state = IBV_QPS_RTR;
	a.path_mtu = IBV_MTU_1024;
	a.dest_qp_num = dest_qpn;
	a.max_dest_rd_atomic = 1;
	a.min_rnr_timer = 12;
	a.ah_attr.is_global = 1;
	a.ah_attr.grh.dgid = *gid;
	a.ah_attr.grh.hop_limit = 1;
	a.ah_attr.dlid = lid;
	a.ah_attr.port_num = 1;
	return ibv_modify_qp(qp, &a,
			     IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
				     IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER);
}

static int to_rts(struct ibv_qp *qp, int timeout, int retry_cnt)
{
	struct ibv_qp_attr a;
	memset(&a, 0, sizeof a);
	a.qp_state = IBV_QPS_RTS;
	a.timeout = timeout;
	a.retry_cnt = retry_cnt;
	a.rnr_retry = 7;
	a.max_rd_atomic = 1;
	return ibv_modify_qp(qp, &a,
			     IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN |
				     IBV_QP_MAX_QP_RD_ATOMIC);
}

/* Posts a signaled 4 KiB WRITE and waits (at most 30 s) for its completion; 0 when one came. */
static int write_and_wait(struct ibv_qp *qp, struct ibv_cq *cq, struct ibv_mr *src, struct ibv_mr *dst,
			  uint64_t wr_id, struct ibv_wc *wc)
{
	struct ibv_sge sge = { .addr = (uintptr_t)src->addr, .length = 4096, .lkey = src->lkey };
	struct ibv_send_wr wr, *bad = NULL;
	memset(&wr, 0, sizeof wr);
	wr.wr_id = wr_id;
	wr.sg_list = &sge;
	wr.num_sge = 1;
	wr.opcode = IBV_WR_RDMA_WRITE;
	wr.send_flags = IBV_SEND_SIGNALED;
	wr.wr.rdma.remote_addr = (uintptr_t)dst->addr;
	wr.wr.rdma.rkey = dst->rkey;
	if (ibv_post_send(qp, &wr, &bad))
		return -1;
	double t0 = now_ms();
	while (now_ms() - t0 < 30000) {
		int n = ibv_poll_cq(cq, 1, wc);
		if (n == 1)
			return 0;
		if (n < 0)
			return -1;
	}
	return -1;
}

int main(void)
{
	int num = 0;
	struct ibv_device **list = ibv_get_device_list(&num);
	if (!list || num < 1) {
		printf("FAIL device_list: no device\n");
		return 100;
	}
	struct ibv_context *ctx = ibv_open_device(list[0]);
	struct ibv_pd *pd = ctx ? ibv_alloc_pd(ctx) : NULL;
	struct ibv_cq *cq = pd ? ibv_create_cq(ctx, 64, NULL, NULL, 0) : NULL;
	if (!cq) {
		printf("FAIL setup: %s\n", strerror(errno));
		return 100;
	}
	static char a[4096], b[4096];
	memset(a, 0x5a, sizeof a);
	struct ibv_mr *ma = ibv_reg_mr(pd, a, sizeof a, IBV_ACCESS_LOCAL_WRITE);
	struct ibv_mr *mb = ibv_reg_mr(pd, b, sizeof b, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
	struct ibv_qp *qa = make_qp(pd, cq), *qb = make_qp(pd, cq);
	union ibv_gid gid;
	struct ibv_port_attr port;
	if (!ma || !mb || !qa || !qb || ibv_query_gid(ctx, 1, 0, &gid) || ibv_query_port(ctx, 1, &port)) {
		printf("FAIL setup: %s\n", strerror(errno));
		return 100;
	}
	check(to_init(qa) == 0 && to_init(qb) == 0, "init", "modify to INIT failed");
	check(to_rtr(qa, &gid, port.lid, qb->qp_num) == 0 && to_rtr(qb, &gid, port.lid, qa->qp_num) == 0, "rtr",
	      "modify to RTR failed");
	check(to_rts(qa, TIMEOUT, RETRY_CNT) == 0 && to_rts(qb, 14, 7) == 0, "rts", "modify to RTS failed");

	struct ibv_qp_attr attr;
	struct ibv_qp_init_attr qia;
	memset(&attr, 0, sizeof attr);
	check(ibv_query_qp(qa, &attr, IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT, &qia) == 0 &&
		      attr.qp_state == IBV_QPS_RTS && attr.timeout == TIMEOUT && attr.retry_cnt == RETRY_CNT,
	      "query_qp_returns_timeout_and_retry_cnt", "wrong state, timeout or retry_cnt");

	struct ibv_wc wc;
	check(write_and_wait(qa, cq, ma, mb, 1, &wc) == 0 && wc.status == IBV_WC_SUCCESS && b[4095] == 0x5a,
	      "write_while_the_peer_lives", "no successful completion");

	/* The peer vanishes: nothing answers the QP any more. */
	check(ibv_destroy_qp(qb) == 0, "destroy_peer", "destroy failed");
	double t0 = now_ms();
	int r = write_and_wait(qa, cq, ma, mb, 2, &wc);
	double elapsed = now_ms() - t0;
	printf("retry exceeded after %.1f ms\n", elapsed);
	check(r == 0 && wc.wr_id == 2 && wc.status == IBV_WC_RETRY_EXC_ERR, "retry_exceeded_completion",
	      "no IBV_WC_RETRY_EXC_ERR completion");
	/* retry_cnt + 1 timeouts at least; never sooner. */
	check(elapsed >= (RETRY_CNT + 1) * 4.096e-3 * (1 << TIMEOUT), "not_before_the_retries",
	      "gave up before retry_cnt + 1 timeouts");
	memset(&attr, 0, sizeof attr);
	check(ibv_query_qp(qa, &attr, IBV_QP_STATE, &qia) == 0 && attr.qp_state == IBV_QPS_ERR, "qp_in_err",
	      "the QP is not in ERR");

	ibv_destroy_qp(qa);
	ibv_dereg_mr(ma);
	ibv_dereg_mr(mb);
	ibv_destroy_cq(cq);
	ibv_dealloc_pd(pd);
	ibv_close_device(ctx);
	ibv_free_device_list(list);
	printf("%d failures\n", failures);
	return failures;
}
