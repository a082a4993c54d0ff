/* SPDX-License-Identifier: BSD-3-Clause */
/* The parts of Linux's ublk uapi (linux/ublk_cmd.h) that smcr-attach --ublk
 * uses and that Debian 12's header (Linux 6.1's) lacks: the ioctl-encoded
 * command opcodes (6.3), UBLK_F_CMD_IOCTL_ENCODE, UBLK_F_UNPRIVILEGED_DEV
 * (6.3), UBLK_F_USER_COPY and the layout of its buffer offsets (6.5), and
 * UBLK_U_CMD_GET_FEATURES (6.5).  Where the installed header has one of them
 * it must agree: each is checked by a static assertion, so a build against
 * a newer header proves these values right. */
#ifndef SMCRBD_UBLK_COMPAT_H
#define SMCRBD_UBLK_COMPAT_H

#include <linux/ioctl.h>
#include <linux/ublk_cmd.h>

/* Defines name as value, or checks the installed header's name is value. */
#define SMCR_UBLK_CHECK(name, value) \
	_Static_assert((name) == (value), #name " differs from smcrbd's ublk-compat.h")

#define SMCR_UBLK_U_CMD(nr)	_IOWR('u', (nr), struct ublksrv_ctrl_cmd)
#define SMCR_UBLK_U_CMD_R(nr)	_IOR('u', (nr), struct ublksrv_ctrl_cmd)
#define SMCR_UBLK_U_IO(nr)	_IOWR('u', (nr), struct ublksrv_io_cmd)

#ifdef UBLK_U_CMD_ADD_DEV
SMCR_UBLK_CHECK(UBLK_U_CMD_GET_DEV_INFO, SMCR_UBLK_U_CMD_R(UBLK_CMD_GET_DEV_INFO));
SMCR_UBLK_CHECK(UBLK_U_CMD_ADD_DEV, SMCR_UBLK_U_CMD(UBLK_CMD_ADD_DEV));
SMCR_UBLK_CHECK(UBLK_U_CMD_DEL_DEV, SMCR_UBLK_U_CMD(UBLK_CMD_DEL_DEV));
SMCR_UBLK_CHECK(UBLK_U_CMD_START_DEV, SMCR_UBLK_U_CMD(UBLK_CMD_START_DEV));
SMCR_UBLK_CHECK(UBLK_U_CMD_STOP_DEV, SMCR_UBLK_U_CMD(UBLK_CMD_STOP_DEV));
SMCR_UBLK_CHECK(UBLK_U_CMD_SET_PARAMS, SMCR_UBLK_U_CMD(UBLK_CMD_SET_PARAMS));
SMCR_UBLK_CHECK(UBLK_U_CMD_GET_PARAMS, SMCR_UBLK_U_CMD_R(UBLK_CMD_GET_PARAMS));
SMCR_UBLK_CHECK(UBLK_U_CMD_START_USER_RECOVERY,
		SMCR_UBLK_U_CMD(UBLK_CMD_START_USER_RECOVERY));
SMCR_UBLK_CHECK(UBLK_U_CMD_END_USER_RECOVERY,
		SMCR_UBLK_U_CMD(UBLK_CMD_END_USER_RECOVERY));
#else
#define UBLK_U_CMD_GET_DEV_INFO		SMCR_UBLK_U_CMD_R(UBLK_CMD_GET_DEV_INFO)
#define UBLK_U_CMD_ADD_DEV		SMCR_UBLK_U_CMD(UBLK_CMD_ADD_DEV)
#define UBLK_U_CMD_DEL_DEV		SMCR_UBLK_U_CMD(UBLK_CMD_DEL_DEV)
#define UBLK_U_CMD_START_DEV		SMCR_UBLK_U_CMD(UBLK_CMD_START_DEV)
#define UBLK_U_CMD_STOP_DEV		SMCR_UBLK_U_CMD(UBLK_CMD_STOP_DEV)
#define UBLK_U_CMD_SET_PARAMS		SMCR_UBLK_U_CMD(UBLK_CMD_SET_PARAMS)
#define UBLK_U_CMD_GET_PARAMS		SMCR_UBLK_U_CMD_R(UBLK_CMD_GET_PARAMS)
#define UBLK_U_CMD_START_USER_RECOVERY	SMCR_UBLK_U_CMD(UBLK_CMD_START_USER_RECOVERY)
#define UBLK_U_CMD_END_USER_RECOVERY	SMCR_UBLK_U_CMD(UBLK_CMD_END_USER_RECOVERY)
#endif

#ifdef UBLK_U_CMD_GET_FEATURES
SMCR_UBLK_CHECK(UBLK_U_CMD_GET_FEATURES, SMCR_UBLK_U_CMD_R(0x13));
#else
#define UBLK_U_CMD_GET_FEATURES		SMCR_UBLK_U_CMD_R(0x13)
#endif
#ifndef UBLK_FEATURES_LEN
#define UBLK_FEATURES_LEN		8
#endif
SMCR_UBLK_CHECK(UBLK_FEATURES_LEN, 8);

#ifdef UBLK_U_IO_FETCH_REQ
SMCR_UBLK_CHECK(UBLK_U_IO_FETCH_REQ, SMCR_UBLK_U_IO(UBLK_IO_FETCH_REQ));
SMCR_UBLK_CHECK(UBLK_U_IO_COMMIT_AND_FETCH_REQ, SMCR_UBLK_U_IO(UBLK_IO_COMMIT_AND_FETCH_REQ));
#else
#define UBLK_U_IO_FETCH_REQ		SMCR_UBLK_U_IO(UBLK_IO_FETCH_REQ)
#define UBLK_U_IO_COMMIT_AND_FETCH_REQ	SMCR_UBLK_U_IO(UBLK_IO_COMMIT_AND_FETCH_REQ)
#endif

#ifdef UBLK_F_UNPRIVILEGED_DEV
SMCR_UBLK_CHECK(UBLK_F_UNPRIVILEGED_DEV, 1ULL << 5);
#else
#define UBLK_F_UNPRIVILEGED_DEV		(1ULL << 5)
#endif
#ifdef UBLK_F_CMD_IOCTL_ENCODE
SMCR_UBLK_CHECK(UBLK_F_CMD_IOCTL_ENCODE, 1ULL << 6);
#else
#define UBLK_F_CMD_IOCTL_ENCODE		(1ULL << 6)
#endif
#ifdef UBLK_F_USER_COPY
SMCR_UBLK_CHECK(UBLK_F_USER_COPY, 1ULL << 7);
#else
#define UBLK_F_USER_COPY		(1ULL << 7)
#endif
SMCR_UBLK_CHECK(UBLK_F_USER_RECOVERY, 1ULL << 3);
SMCR_UBLK_CHECK(UBLK_F_USER_RECOVERY_REISSUE, 1ULL << 4);
SMCR_UBLK_CHECK(UBLKSRV_IO_BUF_OFFSET, 0x80000000);

/* USER_COPY: a request's data is at UBLKSRV_IO_BUF_OFFSET + (queue <<
 * UBLK_QID_OFF) + (tag << UBLK_TAG_OFF) + offset in /dev/ublkcN. */
#ifdef UBLK_TAG_OFF
SMCR_UBLK_CHECK(UBLK_IO_BUF_BITS, 25);
SMCR_UBLK_CHECK(UBLK_TAG_OFF, 25);
SMCR_UBLK_CHECK(UBLK_QID_OFF, 41);
#else
#define UBLK_IO_BUF_BITS		25
#define UBLK_TAG_OFF			UBLK_IO_BUF_BITS
#define UBLK_TAG_BITS			16
#define UBLK_QID_OFF			(UBLK_TAG_OFF + UBLK_TAG_BITS)
#endif

#ifndef UBLK_S_DEV_FAIL_IO
#define UBLK_S_DEV_FAIL_IO		3
#endif
SMCR_UBLK_CHECK(UBLK_S_DEV_QUIESCED, 2);

/* The structures smcr-attach passes are 6.1's: newer kernels' are the
 * same size (their new fields sit in 6.1's reserved ones, or after what
 * ublk_params' len says we gave). */
_Static_assert(sizeof(struct ublksrv_ctrl_cmd) == 32, "ublksrv_ctrl_cmd");
_Static_assert(sizeof(struct ublksrv_ctrl_dev_info) == 64, "ublksrv_ctrl_dev_info");
_Static_assert(sizeof(struct ublksrv_io_desc) == 24, "ublksrv_io_desc");
_Static_assert(sizeof(struct ublksrv_io_cmd) == 16, "ublksrv_io_cmd");

#endif
