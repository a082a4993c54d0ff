/* SPDX-License-Identifier: BSD-3-Clause */
/* smcrbd: how the programs write JSON: built with json-c and printed
 * compact, "/" left as is (the shape of libsmcr's own JSON, which the
 * control socket splices theirs into).  Header only, as strbuf.h; the
 * including program links json-c. */
#ifndef SMCRBD_COMMON_JSONW_H
#define SMCRBD_COMMON_JSONW_H

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include <json-c/json.h>

#define JSONW_FLAGS (JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE)

/* The text of o, or NULL (out of memory); it lives as long as o. */
static inline const char *jsonw_text(struct json_object *o)
{
	return o ? json_object_to_json_string_ext(o, JSONW_FLAGS) : NULL;
}

/* Members of an object; o NULL (out of memory): left out. */
static inline void jsonw_add(struct json_object *o, const char *key, struct json_object *v)
{
	if (o)
		json_object_object_add(o, key, v);
	else
		json_object_put(v);
}

static inline void jsonw_u64(struct json_object *o, const char *key, uint64_t v)
{
	jsonw_add(o, key, json_object_new_uint64(v));
}

static inline void jsonw_str(struct json_object *o, const char *key, const char *v)
{
	jsonw_add(o, key, json_object_new_string(v ? v : ""));
}

static inline void jsonw_bool(struct json_object *o, const char *key, bool v)
{
	jsonw_add(o, key, json_object_new_boolean(v));
}

/* Copies o's text to buf as a control-socket dump does (smcr_ctl_add_section):
 * returns its length, -ENOSPC when it does not fit (the caller asks again
 * with a larger buffer) or -ENOMEM; drops the reference to o. */
static inline int jsonw_dump(struct json_object *o, char *buf, size_t len)
{
	const char *s = jsonw_text(o);
	int r = -ENOMEM;
	size_t n;

	if (s) {
		n = strlen(s);
		r = n < len ? (int)n : -ENOSPC;
		if (r >= 0)
			memcpy(buf, s, n + 1);
	}
	json_object_put(o);
	return r;
}

#endif
