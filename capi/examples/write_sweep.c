/* write_sweep: RDMA WRITE and WRITE-with-immediate through libmrc (the OCP MRC API) between two processes.
 *
 * The program forks: the parent writes, the child is written to. Each process opens the first verbs device
 * (libmrc's, preloaded), creates an MRC context, CQ and QP, registers a buffer with ibv_reg_mr and
 * sends its QP number, GID 0, buffer address and rkey to the other over a socket pair (the GID finds the peer). Then, for every
 * size of the sweep, the writer WRITEs one pattern into the first half of the peer's buffer, waits for its
 * completion, and WRITEs-with-immediate (imm = the size) a second pattern into the second half; the target
 * waits for the immediate's receive completion and checks every byte of both halves before it answers.
 *
 *   LD_PRELOAD=libmrc.so ./write_sweep [max_size]
 *
 * Prints one line per size and "PASS" (exit 0), or what went wrong (exit 1).
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <infiniband/verbs.h>
#include <mrc.h>

#define DIE(...)                                                                                           \
	do {                                                                                               \
		fprintf(stderr, "%s: ", role);                                                             \
		fprintf(stderr, __VA_ARGS__);                                                              \
		fprintf(stderr, " (errno %d: %s)\n", errno, strerror(errno));                              \
		exit(1);                                                                                   \
	} while (0)

static const char *role = "write_sweep";

struct peer_info {
	uint32_t qpn;
	union ibv_gid gid;
	uint64_t addr;
	uint32_t rkey;
};

struct side {
	struct ibv_context *vctx;
	struct ibv_pd *pd;
	struct ibv_mr *mr;
	struct mrc_context *m;
	struct mrc_cq *cq;
	struct mrc_qp *qp;
	uint8_t *buf;
	size_t len;
};

static void xfer(int fd, void *p, size_t n, int out)
{
	uint8_t *b = p;
	while (n > 0) {
		ssize_t r = out ? write(fd, b, n) : read(fd, b, n);
		if (r <= 0)
			DIE("the socket to the other process closed");
		b += r;
		n -= (size_t)r;
	}
}

static uint8_t pattern(size_t size, size_t i, int second)
{
	return (uint8_t)((i * 131u + size * 7u + (second ? 0x5a : 0x11)) ^ (i >> 11));
}

static void setup(struct side *s, size_t len)
{
	int n = 0;
	struct ibv_device **list = ibv_get_device_list(&n);
	if (!list || n < 1)
		DIE("no verbs device (is libmrc.so preloaded?)");
	s->vctx = ibv_open_device(list[0]);
	ibv_free_device_list(list);
	if (!s->vctx)
		DIE("ibv_open_device");
	s->pd = ibv_alloc_pd(s->vctx);
	if (!s->pd)
		DIE("ibv_alloc_pd");
	s->len = len;
	s->buf = aligned_alloc(4096, len);
	if (!s->buf)
		DIE("aligned_alloc");
	memset(s->buf, 0, len);
	s->mr = ibv_reg_mr(s->pd, s->buf, len, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
	if (!s->mr)
		DIE("ibv_reg_mr");
	/* As OCP's mrc_example: the protocol version where the API version goes (libmrc takes it as current). */
	struct mrc_context_attr ca = { .mrc_api_version_used = MRC_PROTOCOL_VERSION_1 };
	s->m = mrc_create_context(s->vctx, &ca);
	if (!s->m)
		DIE("mrc_create_context");
	s->cq = mrc_create_cq(s->m, 256, NULL, NULL, 0);
	if (!s->cq)
		DIE("mrc_create_cq");
	struct mrc_qp_init_attr qi = { 0 };
	qi.send_cq = s->cq;
	qi.recv_cq = s->cq;
	qi.cap.max_send_wr = 64;
	qi.cap.max_recv_wr = 64;
	qi.cap.max_send_sge = 1;
	qi.cap.max_recv_sge = 1;
	qi.pd = s->pd;
	s->qp = mrc_create_qp(s->m, &qi);
	if (!s->qp)
		DIE("mrc_create_qp");
}

static void connect_qp(struct side *s, const struct peer_info *p, uint32_t my_qpn)
{
	/* IBV_QP_PORT at INIT, as OCP's mrc_example passes it (accepted and ignored: MRC QPs use every plane). */
	struct ibv_qp_attr va = { .qp_state = IBV_QPS_INIT, .port_num = 1, .qp_access_flags = IBV_ACCESS_REMOTE_WRITE };
	struct mrc_qp_attr ma = { 0 };
	int rc = mrc_modify_qp(s->qp, &va, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS, &ma, 0);
	if (rc) {
		errno = rc;
		DIE("mrc_modify_qp INIT");
	}
	memset(&va, 0, sizeof(va));
	va.qp_state = IBV_QPS_RTR;
	va.path_mtu = IBV_MTU_4096;
	va.dest_qp_num = p->qpn;
	va.rq_psn = 0;
	va.ah_attr.is_global = 1;
	va.ah_attr.port_num = 1;
	/* RoCE style: the GID finds the peer; dlid stays 0. */
	va.ah_attr.grh.dgid = p->gid;
	ma.mpr.mpr_dest = 8;
	ma.wimm.max_wimm_dest = 128;
	rc = mrc_modify_qp(s->qp, &va, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN,
			   &ma, MRC_QP_MPR_DEST | MRC_QP_MAX_WIMM_DEST);
	if (rc) {
		errno = rc;
		DIE("mrc_modify_qp RTR");
	}
	memset(&va, 0, sizeof(va));
	memset(&ma, 0, sizeof(ma));
	va.qp_state = IBV_QPS_RTS;
	va.sq_psn = 0;
	/* OCP's mrc_example RTS values (retry counts beyond verbs' 3 bits): accepted and ignored, the MRC ones rule. */
	va.timeout = 7;
	va.retry_cnt = 14;
	va.rnr_retry = 14;
	ma.timeout = 14;
	ma.retry.linear_cnt = 7;
	ma.retry.exp_cnt = 25;
	ma.mpr.mpr = 8;
	ma.wimm.max_wimm = 128;
	rc = mrc_modify_qp(s->qp, &va, IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY,
			   &ma, MRC_QP_TIMEOUT | MRC_QP_RETRY_CNT | MRC_QP_MPR | MRC_QP_MAX_WIMM);
	if (rc) {
		errno = rc;
		DIE("mrc_modify_qp RTS");
	}
	(void)my_qpn;
}

/* Waits for one completion of wr_id `id`. */
static struct ibv_wc wait_wc(struct side *s, uint64_t id)
{
	struct timespec t0, t;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (;;) {
		struct ibv_wc wc;
		int n = mrc_poll_cq(s->cq, 1, &wc);
		if (n < 0)
			DIE("mrc_poll_cq");
		if (n == 1) {
			if (wc.status != IBV_WC_SUCCESS)
				DIE("wr %llu completed with status %d (%s)", (unsigned long long)wc.wr_id, wc.status,
				    ibv_wc_status_str(wc.status));
			if (wc.wr_id != id)
				DIE("completion of wr %llu, expected %llu", (unsigned long long)wc.wr_id,
				    (unsigned long long)id);
			return wc;
		}
		clock_gettime(CLOCK_MONOTONIC, &t);
		if (t.tv_sec - t0.tv_sec > 30)
			DIE("no completion of wr %llu in 30 s", (unsigned long long)id);
	}
}

static void post_recv(struct side *s, uint64_t id)
{
	struct ibv_recv_wr wr = { .wr_id = id }, *bad = NULL;
	if (mrc_post_recv(s->qp, &wr, &bad))
		DIE("mrc_post_recv");
}

static void post_write(struct side *s, const struct peer_info *p, size_t off, size_t len, int imm, uint64_t id)
{
	struct ibv_sge sge = { .addr = (uintptr_t)(s->buf + off), .length = (uint32_t)len, .lkey = s->mr->lkey };
	struct ibv_send_wr wr = { 0 }, *bad = NULL;
	wr.wr_id = id;
	wr.sg_list = &sge;
	wr.num_sge = 1;
	wr.opcode = imm ? IBV_WR_RDMA_WRITE_WITH_IMM : IBV_WR_RDMA_WRITE;
	wr.send_flags = IBV_SEND_SIGNALED;
	wr.imm_data = htonl((uint32_t)len);
	wr.wr.rdma.remote_addr = p->addr + off;
	wr.wr.rdma.rkey = p->rkey;
	int rc = mrc_post_send(s->qp, &wr, &bad);
	if (rc) {
		errno = rc;
		DIE("mrc_post_send");
	}
}

static int run(int fd, int writer, size_t max)
{
	role = writer ? "writer" : "target";
	struct side s;
	setup(&s, 2 * max);
	uint32_t qpn = 0;
	if (mrc_get_qpn(s.qp, &qpn))
		DIE("mrc_get_qpn");
	struct peer_info me = { .qpn = qpn, .addr = (uintptr_t)s.buf, .rkey = s.mr->rkey }, peer;
	if (ibv_query_gid(s.vctx, 1, 0, &me.gid))
		DIE("ibv_query_gid");
	xfer(fd, &me, sizeof(me), 1);
	xfer(fd, &peer, sizeof(peer), 0);
	connect_qp(&s, &peer, qpn);

	uint64_t id = 1;
	for (size_t size = 1; size <= max; size *= 4) {
		char go = 0;
		if (writer) {
			xfer(fd, &go, 1, 0); /* the target posted its receive */
			for (size_t i = 0; i < size; i++) {
				s.buf[i] = pattern(size, i, 0);
				s.buf[max + i] = pattern(size, i, 1);
			}
			post_write(&s, &peer, 0, size, 0, id);
			wait_wc(&s, id++);
			post_write(&s, &peer, max, size, 1, id);
			wait_wc(&s, id++);
			xfer(fd, &go, 1, 0); /* the target checked the bytes */
			if (go != 1)
				DIE("the target found wrong bytes at size %zu", size);
			printf("size %zu: WRITE + WRITE_WITH_IMM ok\n", size);
			fflush(stdout);
		} else {
			post_recv(&s, id);
			xfer(fd, &go, 1, 1);
			struct ibv_wc wc = wait_wc(&s, id++);
			if (wc.opcode != IBV_WC_RECV_RDMA_WITH_IMM || !(wc.wc_flags & IBV_WC_WITH_IMM) ||
			    ntohl(wc.imm_data) != size)
				DIE("size %zu: receive completion opcode %d flags %#x imm %u", size, wc.opcode,
				    wc.wc_flags, ntohl(wc.imm_data));
			go = 1;
			for (size_t i = 0; i < size; i++) {
				if (s.buf[i] != pattern(size, i, 0) || s.buf[max + i] != pattern(size, i, 1)) {
					fprintf(stderr, "target: size %zu: byte %zu is %#x/%#x, expected %#x/%#x\n", size,
						i, s.buf[i], s.buf[max + i], pattern(size, i, 0), pattern(size, i, 1));
					go = 2;
					break;
				}
			}
			xfer(fd, &go, 1, 1);
			if (go != 1)
				return 1;
		}
	}
	/* Wait for the other side before tearing down, so that no late packet finds a destroyed QP. */
	char done = 3;
	xfer(fd, &done, 1, 1);
	xfer(fd, &done, 1, 0);
	if (mrc_destroy_qp(s.qp) || mrc_destroy_cq(s.cq) || mrc_destroy_context(s.m))
		DIE("tearing down the MRC objects");
	ibv_dereg_mr(s.mr);
	ibv_dealloc_pd(s.pd);
	ibv_close_device(s.vctx);
	free(s.buf);
	return 0;
}

int main(int argc, char **argv)
{
	size_t max = argc > 1 ? strtoull(argv[1], NULL, 0) : 4u << 20;
	if (max < 1)
		max = 1;
	int sv[2];
	if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv))
		DIE("socketpair");
	fflush(stdout);
	pid_t child = fork();
	if (child < 0)
		DIE("fork");
	if (child == 0) {
		close(sv[0]);
		_exit(run(sv[1], 0, max));
	}
	close(sv[1]);
	int rc = run(sv[0], 1, max);
	int st = 0;
	if (waitpid(child, &st, 0) != child)
		DIE("waitpid");
	if (rc || !WIFEXITED(st) || WEXITSTATUS(st)) {
		fprintf(stderr, "write_sweep: FAIL (writer %d, target status %#x)\n", rc, st);
		return 1;
	}
	printf("PASS\n");
	return 0;
}
