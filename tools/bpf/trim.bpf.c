// SPDX-License-Identifier: GPL-2.0
// trim.bpf.c: packet trimming on a switch port of the mrc-fabric netns fabric (`mrc-fabric trim on`).
//
// Attached at clsact egress of a port whose root qdisc is HTB 1: with class 1:2 (prio 0, trimmed headers) and
// class 1:10 (prio 1, data). For IPv6/UDP packets addressed into the uSID block fcbb:bb00::/32 it reads the
// port's real backlog (skb->dev->qdisc->q.qlen, reached through bpf_cast_to_kern_ctx and BTF) and, above
// TRIM_THRESH packets:
//   - cuts the packet to Ethernet + IPv6 + UDP + TRIM_KEEP bytes of payload (bpf_skb_change_tail),
//   - fixes the IPv6 payload length and the UDP length, sets the UDP checksum to 0 (the fabric runs without
//     UDP checksums: every uN hop rewrites the destination, which the pseudo-header covers),
//   - marks it: IPv6 traffic class 0x1c (DSCP 7),
//   - classifies it into 1:2 and redirects it to this port's egress again: the qdisc charged the packet's
//     pre-trim length (computed before clsact ran); re-entry recomputes it, and then the program only classifies.
//
// Built at run time by mrc-fabric:
//   bpftool btf dump file /sys/kernel/btf/vmlinux format c > vmlinux.h
//   clang -target bpf -O2 -g -DTRIM_THRESH=32 -DTRIM_KEEP=64 -I. -c trim.bpf.c -o trim.o
#include "vmlinux.h"
#include <bpf/bpf_endian.h>
#include <bpf/bpf_helpers.h>

#ifndef TRIM_THRESH
#define TRIM_THRESH 32
#endif
#ifndef TRIM_KEEP
#define TRIM_KEEP 64
#endif

#define ACT_OK 0
#define L2_LEN 14
#define L3_LEN 40
#define L4_LEN 8
#define ETH_IPV6 0x86DD
#define PROTO_UDP 17
#define MARK_TC 0x1c
#define CLASS_HEADERS 0x00010002 /* 1:2 */
#define CLASS_DATA 0x00010010    /* 1:10 */

extern void *bpf_cast_to_kern_ctx(void *) __ksym;

// counters: 0 uSID UDP packets seen, 1 trimmed, 2 bpf_skb_change_tail failures, 3 highest backlog seen
struct {
    __uint(type, BPF_MAP_TYPE_ARRAY);
    __uint(max_entries, 4);
    __type(key, __u32);
    __type(value, __u64);
} trim_stats SEC(".maps");

static __always_inline void count(__u32 idx, __u64 n)
{
    __u64 *v = bpf_map_lookup_elem(&trim_stats, &idx);
    if (v)
        __sync_fetch_and_add(v, n);
}

static __always_inline __u8 traffic_class(const __u8 *ip6)
{
    return (__u8)(((ip6[0] & 0x0f) << 4) | (ip6[1] >> 4));
}

SEC("tc")
int mrc_trim(struct __sk_buff *ctx)
{
    void *data = (void *)(long)ctx->data;
    void *data_end = (void *)(long)ctx->data_end;
    if (data + L2_LEN + L3_LEN + L4_LEN > data_end)
        return ACT_OK;
    struct ethhdr *eth = data;
    if (eth->h_proto != bpf_htons(ETH_IPV6))
        return ACT_OK;
    __u8 *ip6 = data + L2_LEN;
    struct ipv6hdr *hdr = (struct ipv6hdr *)ip6;
    if (hdr->nexthdr != PROTO_UDP)
        return ACT_OK;
    // destination in fcbb:bb00::/32
    if (ip6[24] != 0xfc || ip6[25] != 0xbb || ip6[26] != 0xbb || ip6[27] != 0x00)
        return ACT_OK;
    if (traffic_class(ip6) == MARK_TC) {
        // trimmed here (re-entry after our redirect) or upstream: headers go first
        ctx->priority = CLASS_HEADERS;
        return ACT_OK;
    }
    count(0, 1);

    struct sk_buff *skb = bpf_cast_to_kern_ctx(ctx);
    __u32 backlog = skb->dev->qdisc->q.qlen;
    __u32 k = 3;
    __u64 *hi = bpf_map_lookup_elem(&trim_stats, &k);
    if (hi && backlog > *hi)
        *hi = backlog;

    __u32 cut_len = L2_LEN + L3_LEN + L4_LEN + TRIM_KEEP;
    if (backlog <= TRIM_THRESH || ctx->len <= cut_len) {
        ctx->priority = CLASS_DATA;
        return ACT_OK;
    }
    if (bpf_skb_change_tail(ctx, cut_len, 0)) {
        count(2, 1);
        ctx->priority = CLASS_DATA;
        return ACT_OK;
    }
    // packet pointers are stale after change_tail
    data = (void *)(long)ctx->data;
    data_end = (void *)(long)ctx->data_end;
    if (data + L2_LEN + L3_LEN + L4_LEN > data_end)
        return ACT_OK;
    ip6 = data + L2_LEN;
    hdr = (struct ipv6hdr *)ip6;
    struct udphdr *udp = data + L2_LEN + L3_LEN;
    __u16 payload = (__u16)(cut_len - L2_LEN - L3_LEN);
    hdr->payload_len = bpf_htons(payload);
    udp->len = bpf_htons(payload);
    udp->check = 0;
    ip6[0] = (ip6[0] & 0xf0) | (MARK_TC >> 4);
    ip6[1] = (ip6[1] & 0x0f) | ((MARK_TC & 0x0f) << 4);
    ctx->priority = CLASS_HEADERS;
    count(1, 1);
    return bpf_redirect(ctx->ifindex, 0);
}

char LICENSE[] SEC("license") = "GPL";
