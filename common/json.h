/* SPDX-License-Identifier: BSD-3-Clause */
/* smcrbd: a read-only view of a JSON document (the control sockets answer
 * in JSON; smcrctl and the metrics read it), parsed by json-c.  Numbers
 * keep their text, so 64-bit counters stay exact. */
#ifndef SMCRBD_COMMON_JSON_H
#define SMCRBD_COMMON_JSON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum json_kind { JSON_NULL, JSON_BOOL, JSON_NUM, JSON_STR, JSON_ARR, JSON_OBJ };

struct json {
	enum json_kind type;
	char *key;			/* member name inside an object */
	char *text;			/* JSON_STR: the string; JSON_NUM: digits */
	bool b;
	struct json *child;		/* JSON_ARR, JSON_OBJ: first element */
	struct json *next;		/* next sibling */
};

/* Parses a whole document; NULL on error (message in err). */
struct json *json_parse(const char *s, char *err, size_t errlen);
void json_free(struct json *j);

/* Member of an object, or NULL. */
struct json *json_get(const struct json *obj, const char *key);
/* Typed members with defaults. */
const char *json_get_str(const struct json *obj, const char *key, const char *dflt);
uint64_t json_get_u64(const struct json *obj, const char *key, uint64_t dflt);
bool json_get_bool(const struct json *obj, const char *key, bool dflt);
unsigned json_count(const struct json *arr);
/* A scalar as text ("true", "12", the string, "null"); pairs of numbers
 * (cursors) as "a:b". */
void json_scalar_text(const struct json *j, char *buf, size_t len);
bool json_is_scalar(const struct json *j);

#endif
