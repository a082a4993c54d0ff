/* SPDX-License-Identifier: BSD-3-Clause */
/* smcrbd: private helpers of the message codecs: big-endian fields and
 * 24-bit quantities.  Only the codecs (clc_msg.c, llc_msg.c,
 * cdc_msg.c) use them. */
#ifndef SMCR_BYTEORDER_H
#define SMCR_BYTEORDER_H

#include <endian.h>
#include <stdint.h>

static inline uint32_t smcr_get_be24(const uint8_t p[3])
{
	return (uint32_t)p[0] << 16 | (uint32_t)p[1] << 8 | p[2];
}

static inline void smcr_put_be24(uint8_t p[3], uint32_t v)
{
	p[0] = (uint8_t)(v >> 16);
	p[1] = (uint8_t)(v >> 8);
	p[2] = (uint8_t)v;
}

#define SMCR_U24_MAX 0xFFFFFFu

#endif
