/* What the controller tests from C share (controller.c, events.c): the check printer and an explicit EV
 * profile (id 1, format profile 7, EVS EVs alternating ports 1 and 2, numbered 1000 + i), whose EVs land in
 * `evs`. Included by one test program each, so its static definitions are that program's. */
#ifndef MRC_CAPI_TEST_CTL_COMMON_H
#define MRC_CAPI_TEST_CTL_COMMON_H

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

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
	fflush(stdout);
}

#define OK(call, name) check((call) == 0, name, "expected 0")
#define EVS 4

static struct mrc_ctl_ev evs[EVS];

/* Profile 1: explicit EVs, GOOD and ASSUMED_BAD events. */
static void profiles(struct mrc_context *m)
{
	struct mrc_ctl_ev_fmt_field fields[1] = { { 16 } };
	struct mrc_ctl_ev_fmt_profile_attr f = { 0 };
	f.profile_state = MRC_CTL_PROFILE_OFFLINE;
	f.ev_fmt_mode = MRC_CTL_EV_FMT_MODE_UDP;
	f.ev_fmt_op.op = MRC_CTL_EV_FMT_OP_MODIFY_FIELDS;
	f.ev_fmt_op.fmt_fields = fields;
	f.ev_fmt_op.fmt_field_count = 1;
	OK(mrc_ctl_modify_ev_fmt_profile(m, 7, &f,
					 MRC_CTL_EV_FMT_PROFILE_STATE | MRC_CTL_EV_FMT_PROFILE_MODE |
						 MRC_CTL_EV_FMT_PROFILE_OP),
	   "fmt_offline");
	f = (struct mrc_ctl_ev_fmt_profile_attr){ .profile_state = MRC_CTL_PROFILE_ONLINE };
	OK(mrc_ctl_modify_ev_fmt_profile(m, 7, &f, MRC_CTL_EV_FMT_PROFILE_STATE), "fmt_online");
	struct mrc_ctl_ev_profile_attr e = { 0 };
	e.profile_state = MRC_CTL_PROFILE_OFFLINE;
	e.ev_mode = MRC_CTL_EV_MODE_EXP;
	e.ev_fmt_profile_id = 7;
	e.ev_count = EVS;
	e.ev_min_active = 1;
	e.ev_event_mask = MRC_CTL_EV_GOOD | MRC_CTL_EV_ASSUMED_BAD;
	OK(mrc_ctl_modify_ev_profile(m, 1, &e,
				     MRC_CTL_EV_PROFILE_STATE | MRC_CTL_EV_PROFILE_MODE | MRC_CTL_EV_PROFILE_FMT_ID |
					     MRC_CTL_EV_PROFILE_COUNT | MRC_CTL_EV_PROFILE_MIN_ACTIVE |
					     MRC_CTL_EV_PROFILE_EVENT_MASK),
	   "ev_offline");
	struct mrc_ctl_ev_op_entry ent[EVS];
	memset(ent, 0, sizeof(ent));
	for (int i = 0; i < EVS; i++) {
		uint32_t v = 1000u + (uint32_t)i; /* little-endian in val: libmrc reads val as an LE integer */
		ent[i].ev = MRC_CTL_EV_UNPOPULATED;
		memcpy(ent[i].ev_new.val, &v, sizeof(v));
		ent[i].ev_new.port = (uint8_t)(1 + i % 2);
		evs[i] = ent[i].ev_new;
	}
	e = (struct mrc_ctl_ev_profile_attr){ 0 };
	e.ev_op.op = MRC_CTL_EV_OP_REPLACE_EV;
	e.ev_op.entries = ent;
	e.ev_op.entry_count = EVS;
	OK(mrc_ctl_modify_ev_profile(m, 1, &e, MRC_CTL_EV_PROFILE_EV_OP), "ev_replace_all");
	e = (struct mrc_ctl_ev_profile_attr){ .profile_state = MRC_CTL_PROFILE_ONLINE };
	OK(mrc_ctl_modify_ev_profile(m, 1, &e, MRC_CTL_EV_PROFILE_STATE), "ev_online");
}

#endif
