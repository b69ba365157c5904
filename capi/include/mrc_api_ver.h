/* mrc_api_ver.h: version numbers of the MRC application API (mrc.h), libmrc's own header.
 *
 * A version is a 32-bit number: major in bits 31..24, minor in bits 23..16 and subminor in bits 15..0.
 * A program picks the API revision it was written for by defining MRC_API_VER_USED before including mrc.h
 * (default: the revision this header describes); declarations that appeared later are then hidden.
 *
 * SPDX-License-Identifier: MIT OR Apache-2.0
 */
#ifndef _MRC_API_VER_H_
#define _MRC_API_VER_H_

#define MRC_API_VER_MAJOR_OFFSET 24
#define MRC_API_VER_MINOR_OFFSET 16
#define MRC_API_VER_SUBMINOR_OFFSET 0

/* Usable in #if as well as in code; unsigned so that majors >= 0x80 stay positive. */
#define MRC_API_VER(_major, _minor, _sub_minor)                                                    \
	((((_major) + 0u) << MRC_API_VER_MAJOR_OFFSET) |                                           \
	 (((_minor) + 0u) << MRC_API_VER_MINOR_OFFSET) |                                           \
	 (((_sub_minor) + 0u) << MRC_API_VER_SUBMINOR_OFFSET))

/* "Whatever this header describes": a program that always wants the newest revision. */
#define MRC_API_VER_LATEST MRC_API_VER(0xFF, 0xFF, 0xFFFF)

/* The revision of this header, and the oldest one it still accepts in MRC_API_VER_USED. */
#define MRC_API_CURRENT_VERSION MRC_API_VER(1, 0, 1)
#define MRC_API_LAST_SUPPORTED_VERSION MRC_API_VER(0, 0, 0)

#if !defined(MRC_API_VER_USED)
#define MRC_API_VER_USED MRC_API_CURRENT_VERSION
#elif MRC_API_VER_USED == MRC_API_VER_LATEST
#undef MRC_API_VER_USED
#define MRC_API_VER_USED MRC_API_CURRENT_VERSION
#endif

#if MRC_API_VER_USED > MRC_API_CURRENT_VERSION
#error "MRC_API_VER_USED names a revision newer than this mrc.h"
#elif MRC_API_VER_USED < MRC_API_LAST_SUPPORTED_VERSION
#error "MRC_API_VER_USED names a revision older than this mrc.h still accepts"
#elif MRC_API_VER_USED == MRC_API_LAST_SUPPORTED_VERSION
#warning "MRC_API_VER_USED is the oldest accepted revision, which a later mrc.h may drop"
#endif

/* The implementation's own (vendor) extensions are versioned separately, in the same format. libmrc defines
 * no vendor extensions; the numbers are kept for source compatibility. */
#define MRC_VENDOR_API_CURRENT_VERSION MRC_API_VER(1, 0, 0)
#define MRC_VENDOR_API_LAST_SUPPORTED_VERSION MRC_API_VER(0, 0, 0)

#if !defined(MRC_VENDOR_API_VER_USED)
#define MRC_VENDOR_API_VER_USED MRC_VENDOR_API_CURRENT_VERSION
#elif MRC_VENDOR_API_VER_USED == MRC_API_VER_LATEST
#undef MRC_VENDOR_API_VER_USED
#define MRC_VENDOR_API_VER_USED MRC_VENDOR_API_CURRENT_VERSION
#endif

#if MRC_VENDOR_API_VER_USED > MRC_VENDOR_API_CURRENT_VERSION
#error "MRC_VENDOR_API_VER_USED names a vendor revision newer than this mrc.h"
#elif MRC_VENDOR_API_VER_USED < MRC_VENDOR_API_LAST_SUPPORTED_VERSION
#error "MRC_VENDOR_API_VER_USED names a vendor revision older than this mrc.h still accepts"
#elif MRC_VENDOR_API_VER_USED == MRC_VENDOR_API_LAST_SUPPORTED_VERSION
#warning "MRC_VENDOR_API_VER_USED is the oldest accepted vendor revision, which a later mrc.h may drop"
#endif

#endif /* _MRC_API_VER_H_ */
