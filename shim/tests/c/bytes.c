/* The bytes that pass through ibv_post_send, run under LD_PRELOAD=libmrc_verbs_shim.so by tests/bytes.rs: two QPs
 * of one process connected to each other over the shim. WRITEs of many sizes (one byte, around the 1024-byte path
 * MTU, many packets, inline), each with bytes of its own, land byte-exact at their own offsets in a region
 * fenced by guard bytes; a READ of the whole region brings back exactly what was written, into a buffer fenced
 * the same way; a READ from an offset returns that slice. Prints "ok NAME" or "FAIL NAME: ..." per check and
 * "<n> failures"; the exit status is the number of failed checks. */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <infiniband/verbs.h>

#include "check.h"

#define GUARD 4096
#define GUARD_BYTE 0xA5
#define REGION (4 << 20)
#define INLINE 64

/* Byte i of message k: differs per message and per position, never constant over a page. */
static uint8_t pattern(uint32_t k, size_t i)
{
	uint64_t x = (k + 1) * 0x9E3779B97F4A7C15ull ^ (i * 0xBF58476D1CE4E5B9ull);
	return (uint8_t)(x >> 56 ^ x >> 17);
}

/* A buffer of `len` bytes with GUARD guard bytes before and after; returns the usable middle. */
static uint8_t *fenced(size_t len)
{
	uint8_t *b = malloc(len + 2 * GUARD);
	if (!b)
		return NULL;
	memset(b, GUARD_BYTE, GUARD);
	memset(b + GUARD + len, GUARD_BYTE, GUARD);
	memset(b + GUARD, 0, len);
	return b + GUARD;
}

static int guards_intact(const uint8_t *mid, size_t len)
{
	for (size_t i = 0; i < GUARD; i++)
		if (mid[-(ptrdiff_t)GUARD + (ptrdiff_t)i] != GUARD_BYTE || mid[len + i] != GUARD_BYTE)
			return 0;
	return 1;
}

static struct ibv_qp *make_qp(struct ibv_pd *pd, struct ibv_cq *cq)
{
	struct ibv_qp_init_attr ia;
	memset(&ia, 0, sizeof ia);
	ia.send_cq = cq;
	ia.recv_cq = cq;
	ia.qp_type = IBV_QPT_RC;
	ia.cap.max_send_wr = 64;
	ia.cap.max_recv_wr = 16;
	ia.cap.max_send_sge = 2;
	ia.cap.max_recv_sge = 1;
	ia.cap.max_inline_data = INLINE;
	return ibv_create_qp(pd, &ia);
}

static int connect_qp(struct ibv_qp *qp, const union ibv_gid *gid, uint16_t lid, uint32_t dest_qpn)
{
	struct ibv_qp_attr a;
	memset(&a, 0, sizeof a);
	a.qp_state = IBV_QPS_INIT;
	a.port_num = 1;
	a.qp_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS))
		return -1;
	memset(&a, 0, sizeof a);
	a.qp_state = IBV_QPS_RTR;
	a.path_mtu = IBV_MTU_1024;
	a.dest_qp_num = dest_qpn;
	a.max_dest_rd_atomic = 16;
	a.min_rnr_timer = 12;
	a.ah_attr.is_global = 1;
	a.ah_attr.grh.dgid = *gid;
	a.ah_attr.grh.hop_limit = 1;
	a.ah_attr.dlid = lid;
	a.ah_attr.port_num = 1;
	if (ibv_modify_qp(qp, &a,
			  IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
				  IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER))
		return -1;
	memset(&a, 0, sizeof a);
	a.qp_state = IBV_QPS_RTS;
	a.timeout = 14;
	a.retry_cnt = 7;
	a.rnr_retry = 7;
	a.max_rd_atomic = 16;
	return ibv_modify_qp(qp, &a,
			     IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN |
				     IBV_QP_MAX_QP_RD_ATOMIC);
}

/* Waits (at most 30 s) for `n` completions; 0 when all came and succeeded in posting order from `first`. */
static int wait_all(struct ibv_cq *cq, int n, uint64_t first)
{
	double t0 = now_ms();
	int got = 0;
	while (got < n && now_ms() - t0 < 30000) {
		struct ibv_wc wc[16];
		int k = ibv_poll_cq(cq, 16, wc);
		if (k < 0)
			return -1;
		for (int i = 0; i < k; i++, got++) {
			if (wc[i].status != IBV_WC_SUCCESS || wc[i].wr_id != first + (uint64_t)got) {
				printf("completion %d: wr %llu status %s\n", got, (unsigned long long)wc[i].wr_id,
				       ibv_wc_status_str(wc[i].status));
				return -1;
			}
		}
	}
	return got == n ? 0 : -1;
}

static int post(struct ibv_qp *qp, uint64_t id, enum ibv_wr_opcode op, int flags, void *local, uint32_t len,
		uint32_t lkey, uint64_t remote, uint32_t rkey)
{
	struct ibv_sge sge = { .addr = (uintptr_t)local, .length = len, .lkey = lkey };
	struct ibv_send_wr wr, *bad = NULL;
	memset(&wr, 0, sizeof wr);
	wr.wr_id = id;
	wr.sg_list = &sge;
	wr.num_sge = 1;
	wr.opcode = op;
	wr.send_flags = IBV_SEND_SIGNALED | flags;
	wr.wr.rdma.remote_addr = remote;
	wr.wr.rdma.rkey = rkey;
	return ibv_post_send(qp, &wr, &bad);
}

/* The first byte at which `a` and `b` differ, or -1. */
static long first_difference(const uint8_t *a, const uint8_t *b, size_t len)
{
	for (size_t i = 0; i < len; i++)
		if (a[i] != b[i])
			return (long)i;
	return -1;
}

/* Message sizes and where each lands: after each other in the region, 7 bytes apart. */
static const uint32_t SIZES[] = { 1, 2, 63, 64, 1023, 1024, 1025, 4096, 65537, 1 << 20, 2 << 20 };
#define NSIZES (sizeof SIZES / sizeof SIZES[0])

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
	struct ibv_cq *cq = pd ? ibv_create_cq(ctx, 256, NULL, NULL, 0) : NULL;
	uint8_t *src = fenced(REGION), *dst = fenced(REGION), *back = fenced(REGION);
	if (!cq || !src || !dst || !back) {
		printf("FAIL setup: %s\n", strerror(errno));
		return 100;
	}
	size_t offs[NSIZES], end = 0;
	for (size_t k = 0; k < NSIZES; k++) {
		offs[k] = end;
		end += SIZES[k] + 7;
	}
	if (end > REGION) {
		printf("FAIL setup: the sizes need %zu bytes\n", end);
		return 100;
	}
	/* Every byte of the source region differs from the destination's zeros at least somewhere per message. */
	for (size_t k = 0; k < NSIZES; k++)
		for (size_t i = 0; i < SIZES[k]; i++)
			src[offs[k] + i] = pattern((uint32_t)k, i) | 1;
	struct ibv_mr *ms = ibv_reg_mr(pd, src, REGION, IBV_ACCESS_LOCAL_WRITE);
	struct ibv_mr *md = ibv_reg_mr(pd, dst, REGION, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
							    IBV_ACCESS_REMOTE_READ);
	struct ibv_mr *mback = ibv_reg_mr(pd, back, REGION, IBV_ACCESS_LOCAL_WRITE);
	struct ibv_qp *qa = make_qp(pd, cq), *qb = make_qp(pd, cq);
	union ibv_gid gid;
	struct ibv_port_attr port;
	if (!ms || !md || !mback || !qa || !qb || ibv_query_gid(ctx, 1, 0, &gid) ||
	    ibv_query_port(ctx, 1, &port)) {
		printf("FAIL setup: %s\n", strerror(errno));
		return 100;
	}
	/* RoCE style: the GID finds the peer; the LID is left 0. */
	check(connect_qp(qa, &gid, 0, qb->qp_num) == 0 && connect_qp(qb, &gid, 0, qa->qp_num) == 0,
	      "connect", "modify to RTS failed");

	/* WRITEs: each message to its own place; the small ones also inline (the shim copies them at posting). */
	int posted = 0;
	for (size_t k = 0; k < NSIZES; k++) {
		int flags = SIZES[k] <= INLINE ? IBV_SEND_INLINE : 0;
		if (post(qa, (uint64_t)k, IBV_WR_RDMA_WRITE, flags, src + offs[k], SIZES[k], ms->lkey,
			 (uintptr_t)(dst + offs[k]), md->rkey) == 0)
			posted++;
		if (flags)
			/* Inline data was copied when posted: changing the source now must not change what lands. */
			memset(src + offs[k], 0, SIZES[k]);
	}
	check(posted == (int)NSIZES && wait_all(cq, posted, 0) == 0, "writes_complete", "not every WRITE completed");
	/* What must have landed: restore the inline sources' bytes for the comparison. */
	for (size_t k = 0; k < NSIZES; k++)
		if (SIZES[k] <= INLINE)
			for (size_t i = 0; i < SIZES[k]; i++)
				src[offs[k] + i] = pattern((uint32_t)k, i) | 1;
	long at = first_difference(src, dst, REGION);
	if (at >= 0)
		printf("destination byte %ld: %#x, want %#x\n", at, dst[at], src[at]);
	check(at < 0, "write_bytes_exact", "a WRITE's bytes differ or landed elsewhere");
	check(guards_intact(dst, REGION), "write_guards", "bytes written outside the destination region");

	/* READ the whole region back, in 4 pieces of 1 MiB, and one odd slice. */
	posted = 0;
	for (int p = 0; p < 4; p++)
		if (post(qa, 100 + (uint64_t)p, IBV_WR_RDMA_READ, 0, back + p * (REGION / 4), REGION / 4,
			 mback->lkey, (uintptr_t)(dst + p * (REGION / 4)), md->rkey) == 0)
			posted++;
	check(posted == 4 && wait_all(cq, 4, 100) == 0, "reads_complete", "not every READ completed");
	at = first_difference(back, src, REGION);
	if (at >= 0)
		printf("read-back byte %ld: %#x, want %#x\n", at, back[at], src[at]);
	check(at < 0, "read_bytes_exact", "a READ brought back other bytes");
	check(guards_intact(back, REGION), "read_guards", "a READ wrote outside its local buffer");
	memset(back, 0, REGION);
	size_t k = NSIZES - 2, skip = 12345;
	check(post(qa, 200, IBV_WR_RDMA_READ, 0, back, 5000, mback->lkey, (uintptr_t)(dst + offs[k] + skip),
		   md->rkey) == 0 &&
		      wait_all(cq, 1, 200) == 0 && first_difference(back, src + offs[k] + skip, 5000) < 0 &&
		      back[5000] == 0 && guards_intact(back, REGION),
	      "read_slice", "a READ at an offset returned other bytes or more of them");

	ibv_destroy_qp(qa);
	ibv_destroy_qp(qb);
	ibv_dereg_mr(ms);
	ibv_dereg_mr(md);
	ibv_dereg_mr(mback);
	ibv_destroy_cq(cq);
	ibv_dealloc_pd(pd);
	ibv_close_device(ctx);
	ibv_free_device_list(list);
	printf("%d failures\n", failures);
	return failures;
}
