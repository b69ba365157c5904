/* Misuse of the verbs API from C, run under LD_PRELOAD=libmrc_verbs_shim.so by tests/misuse.rs.
 * Every call must fail with the errno a provider returns, never crash. Prints one line per check
 * ("ok NAME" or "FAIL NAME: ..."); the exit status is the number of failed checks. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <infiniband/verbs.h>

#include "check.h"

/* A call that must return NULL with errno `e`. */
#define NULL_WITH(call, e, name)                                                                  \
	do {                                                                                      \
		errno = 0;                                                                        \
		void *p_ = (void *)(call);                                                        \
		check(p_ == NULL && errno == (e), name, "expected NULL with errno " #e);          \
	} while (0)

/* A call that must return the errno value `e`. */
#define RET(call, e, name)                                                                        \
	do {                                                                                      \
		int r_ = (call);                                                                  \
		check(r_ == (e), name, "expected return " #e);                                    \
	} while (0)

int main(void)
{
	int num = 0;
	struct ibv_device **list = ibv_get_device_list(&num);
	if (!list || num < 1) {
		printf("FAIL device_list: no device\n");
		return 100;
	}
	struct ibv_context *ctx = ibv_open_device(list[0]);
	if (!ctx) {
		printf("FAIL open_device: %s\n", strerror(errno));
		return 100;
	}
	check(fcntl(ctx->async_fd, F_GETFD) >= 0, "async_fd_is_valid", "fcntl failed");
	check(ctx->num_comp_vectors >= 1, "num_comp_vectors", "zero");

	/* NULL pointers and foreign objects. */
	NULL_WITH(ibv_open_device(NULL), EINVAL, "open_device_null");
	NULL_WITH(ibv_alloc_pd(NULL), EINVAL, "alloc_pd_null_context");
	NULL_WITH(ibv_alloc_pd((struct ibv_context *)&num), EINVAL, "alloc_pd_foreign_context");
	RET(ibv_dealloc_pd(NULL), EINVAL, "dealloc_pd_null");
	RET(ibv_query_device(ctx, NULL), EINVAL, "query_device_null_attr");
	struct ibv_port_attr pa;
	RET(ibv_query_port(ctx, 1, NULL), EINVAL, "query_port_null_attr");
	RET(ibv_query_port(ctx, 2, &pa), EINVAL, "query_port_bad_port");
	union ibv_gid gid;
	check(ibv_query_gid(ctx, 1, 7, &gid) == -1 && errno == EINVAL, "query_gid_bad_index", "expected -1/EINVAL");
	NULL_WITH(ibv_create_cq(ctx, 0, NULL, NULL, 0), EINVAL, "create_cq_zero_entries");
	NULL_WITH(ibv_create_cq(ctx, 16, NULL, NULL, 5), EINVAL, "create_cq_bad_vector");
	NULL_WITH(ibv_create_cq(NULL, 16, NULL, NULL, 0), EINVAL, "create_cq_null_context");

	struct ibv_pd *pd = ibv_alloc_pd(ctx);
	check(pd != NULL, "alloc_pd", "failed");
	char *buf = malloc(8192);

	/* Memory regions. */
	NULL_WITH(ibv_reg_mr(pd, buf, 0, IBV_ACCESS_LOCAL_WRITE), EINVAL, "reg_mr_zero_length");
	NULL_WITH(ibv_reg_mr(NULL, buf, 64, IBV_ACCESS_LOCAL_WRITE), EINVAL, "reg_mr_null_pd");
	NULL_WITH(ibv_reg_mr(pd, NULL, 64, IBV_ACCESS_LOCAL_WRITE), EINVAL, "reg_mr_null_addr");
	NULL_WITH(ibv_reg_mr(pd, (void *)0x1000, 4096, IBV_ACCESS_LOCAL_WRITE), EFAULT, "reg_mr_unmapped");
	NULL_WITH(ibv_reg_mr(pd, buf, 64, IBV_ACCESS_REMOTE_WRITE), EINVAL, "reg_mr_remote_write_without_local");
	NULL_WITH(ibv_reg_mr(pd, buf, 64, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_ON_DEMAND), EOPNOTSUPP,
		  "reg_mr_on_demand");
	struct ibv_mr *mr = ibv_reg_mr(pd, buf, 8192,
				       IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ);
	check(mr != NULL && mr->lkey != 0 && mr->length == 8192 && mr->addr == buf, "reg_mr", "failed");

	/* Completion channel and CQ. */
	struct ibv_comp_channel *ch = ibv_create_comp_channel(ctx);
	check(ch != NULL && fcntl(ch->fd, F_GETFD) >= 0, "comp_channel_has_a_real_fd", "no fd");
	struct ibv_cq *cq = ibv_create_cq(ctx, 64, NULL, ch, 0);
	check(cq != NULL && cq->cqe >= 64 && cq->channel == ch, "create_cq", "failed");
	RET(ibv_req_notify_cq(cq, 0), 0, "req_notify_cq");
	struct ibv_wc wc[4];
	check(ibv_poll_cq(cq, 4, wc) == 0, "poll_empty_cq", "expected 0");
	check(ibv_poll_cq(cq, -1, wc) < 0, "poll_cq_negative_count", "expected < 0");
	fcntl(ch->fd, F_SETFL, fcntl(ch->fd, F_GETFL) | O_NONBLOCK);
	struct ibv_cq *ev_cq;
	void *ev_ctx;
	errno = 0;
	check(ibv_get_cq_event(ch, &ev_cq, &ev_ctx) == -1 && errno == EAGAIN, "get_cq_event_nonblocking_empty",
	      "expected -1/EAGAIN");
	fcntl(ctx->async_fd, F_SETFL, fcntl(ctx->async_fd, F_GETFL) | O_NONBLOCK);
	struct ibv_async_event aev;
	errno = 0;
	check(ibv_get_async_event(ctx, &aev) == -1 && errno == EAGAIN, "get_async_event_nonblocking_empty",
	      "expected -1/EAGAIN");
	RET(ibv_destroy_comp_channel(ch), EBUSY, "destroy_channel_in_use");

	/* QP creation. */
	NULL_WITH(ibv_create_qp(pd, NULL), EINVAL, "create_qp_null_attr");
	struct ibv_qp_init_attr ia;
	memset(&ia, 0, sizeof ia);
	ia.send_cq = cq;
	ia.recv_cq = cq;
	ia.cap.max_send_wr = 16;
	ia.cap.max_recv_wr = 16;
	ia.cap.max_send_sge = 1;
	ia.cap.max_recv_sge = 1;
	ia.qp_type = IBV_QPT_UD;
	NULL_WITH(ibv_create_qp(pd, &ia), EOPNOTSUPP, "create_ud_qp");
	ia.qp_type = IBV_QPT_RC;
	ia.send_cq = NULL;
	NULL_WITH(ibv_create_qp(pd, &ia), EINVAL, "create_qp_null_cq");
	ia.send_cq = (struct ibv_cq *)pd;
	NULL_WITH(ibv_create_qp(pd, &ia), EINVAL, "create_qp_pd_as_cq");
	ia.send_cq = cq;
	ia.cap.max_send_wr = 1 << 30;
	NULL_WITH(ibv_create_qp(pd, &ia), EINVAL, "create_qp_too_deep");
	ia.cap.max_send_wr = 16;
	struct ibv_qp *qp = ibv_create_qp(pd, &ia);
	check(qp != NULL && qp->state == IBV_QPS_RESET && qp->qp_num != 0, "create_qp", "failed");
	check(ia.cap.max_send_wr >= 16 && ia.cap.max_inline_data > 0, "create_qp_writes_back_caps", "caps");

	/* Posting on a QP in RESET. */
	struct ibv_sge sge = {.addr = (uintptr_t)buf, .length = 64, .lkey = mr->lkey};
	struct ibv_send_wr swr, *bad_s = NULL;
	memset(&swr, 0, sizeof swr);
	swr.sg_list = &sge;
	swr.num_sge = 1;
	swr.opcode = IBV_WR_SEND;
	swr.send_flags = IBV_SEND_SIGNALED;
	RET(ibv_post_send(qp, &swr, &bad_s), EINVAL, "post_send_in_reset");
	check(bad_s == &swr, "post_send_in_reset_sets_bad_wr", "bad_wr not set");
	struct ibv_recv_wr rwr, *bad_r = NULL;
	memset(&rwr, 0, sizeof rwr);
	rwr.sg_list = &sge;
	rwr.num_sge = 1;
	RET(ibv_post_recv(qp, &rwr, &bad_r), EINVAL, "post_recv_in_reset");
	check(bad_r == &rwr, "post_recv_in_reset_sets_bad_wr", "bad_wr not set");

	/* State machine. */
	struct ibv_qp_attr attr;
	memset(&attr, 0, sizeof attr);
	RET(ibv_modify_qp(qp, NULL, IBV_QP_STATE), EINVAL, "modify_qp_null_attr");
	attr.qp_state = IBV_QPS_RTR;
	RET(ibv_modify_qp(qp, &attr, IBV_QP_STATE), EINVAL, "modify_qp_reset_to_rtr");
	attr.qp_state = IBV_QPS_INIT;
	RET(ibv_modify_qp(qp, &attr, IBV_QP_STATE), EINVAL, "modify_qp_init_missing_attrs");
	attr.port_num = 3;
	RET(ibv_modify_qp(qp, &attr, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS), EINVAL,
	    "modify_qp_bad_port");
	attr.port_num = 1;
	attr.qp_access_flags = IBV_ACCESS_REMOTE_WRITE;
	RET(ibv_modify_qp(qp, &attr, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS), 0,
	    "modify_qp_to_init");
	check(qp->state == IBV_QPS_INIT, "qp_state_is_init", "state field not updated");
	struct ibv_qp_init_attr qia;
	memset(&attr, 0, sizeof attr);
	RET(ibv_query_qp(qp, &attr, IBV_QP_STATE, &qia), 0, "query_qp");
	check(attr.qp_state == IBV_QPS_INIT && attr.qp_access_flags == IBV_ACCESS_REMOTE_WRITE &&
		      qia.send_cq == cq && qia.qp_type == IBV_QPT_RC,
	      "query_qp_reports_state_and_attrs", "wrong attributes");
	RET(ibv_post_send(qp, &swr, &bad_s), EINVAL, "post_send_in_init");
	memset(&attr, 0, sizeof attr);
	attr.qp_state = IBV_QPS_RTR;
	attr.path_mtu = IBV_MTU_1024;
	attr.dest_qp_num = 0x42;
	attr.max_dest_rd_atomic = 1;
	attr.min_rnr_timer = 12;
	attr.ah_attr.port_num = 1;
	RET(ibv_modify_qp(qp, &attr,
			  IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
				  IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER),
	    EINVAL, "modify_qp_rtr_without_gid");
	/* A GID flagged but left zero: refused, the field named in the log line. */
	attr.ah_attr.is_global = 1;
	RET(ibv_modify_qp(qp, &attr,
			  IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
				  IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER),
	    EINVAL, "modify_qp_rtr_unset_gid");
	attr.ah_attr.is_global = 0;
	attr.qp_state = IBV_QPS_SQD;
	RET(ibv_modify_qp(qp, &attr, IBV_QP_STATE), EOPNOTSUPP, "modify_qp_sqd_unsupported");

	/* Unsupported verbs: errno, no crash. */
	struct ibv_srq_init_attr sa;
	memset(&sa, 0, sizeof sa);
	sa.attr.max_wr = 16;
	sa.attr.max_sge = 1;
	NULL_WITH(ibv_create_srq(pd, &sa), EOPNOTSUPP, "create_srq_unsupported");
	struct ibv_ah_attr ah;
	memset(&ah, 0, sizeof ah);
	NULL_WITH(ibv_create_ah(pd, &ah), EOPNOTSUPP, "create_ah_unsupported");
	NULL_WITH(ibv_alloc_mw(pd, IBV_MW_TYPE_1), EOPNOTSUPP, "alloc_mw_unsupported");
	struct ibv_cq_init_attr_ex cqa;
	memset(&cqa, 0, sizeof cqa);
	cqa.cqe = 16;
	NULL_WITH(ibv_create_cq_ex(ctx, &cqa), EOPNOTSUPP, "create_cq_ex_unsupported");
	NULL_WITH(ibv_qp_to_qp_ex(qp), EOPNOTSUPP, "qp_to_qp_ex_unsupported");
	RET(ibv_attach_mcast(qp, &gid, 0), EOPNOTSUPP, "attach_mcast_unsupported");

	/* Teardown in the wrong order, then the right one. */
	RET(ibv_dealloc_pd(pd), EBUSY, "dealloc_pd_in_use");
	RET(ibv_destroy_cq(cq), EBUSY, "destroy_cq_in_use");
	RET(ibv_destroy_qp(qp), 0, "destroy_qp");
	RET(ibv_destroy_qp(qp), EINVAL, "destroy_qp_twice");
	RET(ibv_dereg_mr(mr), 0, "dereg_mr");
	RET(ibv_dereg_mr(mr), EINVAL, "dereg_mr_twice");
	RET(ibv_destroy_cq(cq), 0, "destroy_cq");
	RET(ibv_destroy_comp_channel(ch), 0, "destroy_channel");
	RET(ibv_dealloc_pd(pd), 0, "dealloc_pd");
	RET(ibv_dealloc_pd(pd), EINVAL, "dealloc_pd_twice");
	RET(ibv_close_device(ctx), 0, "close_device");
	RET(ibv_close_device(ctx), EINVAL, "close_device_twice");
	/* As in rdma-core, closing a context with objects left succeeds (perftest's ib_send_bw client leaves its
	 * receive CQ); the objects stay usable. */
	struct ibv_context *ctx2 = ibv_open_device(list[0]);
	struct ibv_cq *cq2 = ctx2 ? ibv_create_cq(ctx2, 4, NULL, NULL, 0) : NULL;
	check(cq2 != NULL, "open_second_context", "failed");
	RET(ibv_close_device(ctx2), 0, "close_device_with_a_cq_left");
	struct ibv_wc wc2;
	RET(ibv_poll_cq(cq2, 1, &wc2), 0, "poll_cq_after_close");
	RET(ibv_destroy_cq(cq2), 0, "destroy_cq_after_close");
	ibv_free_device_list(list);
	free(buf);
	printf("%d failures\n", failures);
	return failures;
}
