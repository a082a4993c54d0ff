/* SPDX-License-Identifier: BSD-3-Clause */
/* smcrbd: smcrctl's view of a JSON document (see json.h), parsed by json-c. */
#include <config.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>

#include "json.h"

static struct json *node(enum json_kind t)
{
	struct json *j = calloc(1, sizeof(*j));

	if (j)
		j->type = t;
	return j;
}

/* Copies json-c's tree into ours (numbers keep json-c's text of them, so
 * counters above 2^63 stay exact). */
static struct json *convert(struct json_object *o)
{
	struct json *j, **tail;
	size_t i, n;

	switch (json_object_get_type(o)) {
	case json_type_null:
		return node(JSON_NULL);
	case json_type_boolean:
		j = node(JSON_BOOL);
		if (j)
			j->b = json_object_get_boolean(o);
		return j;
	case json_type_int:
	case json_type_double:
		j = node(JSON_NUM);
		if (j && !(j->text = strdup(json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN))))
			goto free_node;
		return j;
	case json_type_string:
		j = node(JSON_STR);
		if (j && !(j->text = strndup(json_object_get_string(o),
					      (size_t)json_object_get_string_len(o))))
			goto free_node;
		return j;
	case json_type_array:
		j = node(JSON_ARR);
		if (!j)
			return NULL;
		tail = &j->child;
		n = json_object_array_length(o);
		for (i = 0; i < n; i++) {
			if (!(*tail = convert(json_object_array_get_idx(o, i))))
				goto free_node;
			tail = &(*tail)->next;
		}
		return j;
	case json_type_object:
		j = node(JSON_OBJ);
		if (!j)
			return NULL;
		tail = &j->child;
		json_object_object_foreach(o, key, val) {
			if (!(*tail = convert(val)))
				goto free_node;
			if (!((*tail)->key = strdup(key)))
				goto free_node;
			tail = &(*tail)->next;
		}
		return j;
	}
	return NULL;
free_node:
	json_free(j);
	return NULL;
}

struct json *json_parse(const char *s, char *err, size_t errlen)
{
	struct json_tokener *tok = json_tokener_new();
	struct json_object *o;
	enum json_tokener_error e;
	struct json *j = NULL;
	size_t len = strlen(s), end;

	if (err && errlen)
		err[0] = '\0';
	if (!tok) {
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	o = json_tokener_parse_ex(tok, s, (int)len);
	e = json_tokener_get_error(tok);
	if (!o || e != json_tokener_success) {
		/* json_tokener_continue: the text ended inside a value */
		snprintf(err, errlen, "%s", e == json_tokener_continue ? "truncated document"
			 : json_tokener_error_desc(e));
		goto free_tok;
	}
	for (end = json_tokener_get_parse_end(tok); end < len; end++)
		if (!strchr(" \t\r\n", s[end])) {
			snprintf(err, errlen, "trailing data at '%.20s'", s + end);
			goto put_obj;
		}
	j = convert(o);
	if (!j)
		snprintf(err, errlen, "out of memory");
put_obj:
	json_object_put(o);
free_tok:
	json_tokener_free(tok);
	return j;
}

void json_free(struct json *j)
{
	while (j) {
		struct json *next = j->next;

		json_free(j->child);
		free(j->key);
		free(j->text);
		free(j);
		j = next;
	}
}

struct json *json_get(const struct json *obj, const char *key)
{
	struct json *c;

	if (!obj || obj->type != JSON_OBJ)
		return NULL;
	for (c = obj->child; c; c = c->next)
		if (c->key && !strcmp(c->key, key))
			return c;
	return NULL;
}

const char *json_get_str(const struct json *obj, const char *key, const char *dflt)
{
	struct json *j = json_get(obj, key);

	return j && j->type == JSON_STR ? j->text : dflt;
}

uint64_t json_get_u64(const struct json *obj, const char *key, uint64_t dflt)
{
	struct json *j = json_get(obj, key);

	return j && j->type == JSON_NUM ? strtoull(j->text, NULL, 10) : dflt;
}

bool json_get_bool(const struct json *obj, const char *key, bool dflt)
{
	struct json *j = json_get(obj, key);

	return j && j->type == JSON_BOOL ? j->b : dflt;
}

unsigned json_count(const struct json *arr)
{
	const struct json *c;
	unsigned n = 0;

	if (!arr || (arr->type != JSON_ARR && arr->type != JSON_OBJ))
		return 0;
	for (c = arr->child; c; c = c->next)
		n++;
	return n;
}

bool json_is_scalar(const struct json *j)
{
	if (j->type == JSON_ARR) {
		const struct json *c;

		/* [a, b] of numbers: a cursor (wrap:count). */
		if (json_count(j) != 2)
			return false;
		for (c = j->child; c; c = c->next)
			if (c->type != JSON_NUM)
				return false;
		return true;
	}
	return j->type != JSON_OBJ;
}

void json_scalar_text(const struct json *j, char *buf, size_t len)
{
	switch (j->type) {
	case JSON_NULL: snprintf(buf, len, "-"); break;
	case JSON_BOOL: snprintf(buf, len, "%s", j->b ? "yes" : "no"); break;
	case JSON_NUM:
	case JSON_STR: snprintf(buf, len, "%s", j->text); break;
	case JSON_ARR:
		if (json_is_scalar(j)) {
			snprintf(buf, len, "%s:%s", j->child->text, j->child->next->text);
			break;
		}
		/* fall through */
	default: snprintf(buf, len, "..."); break;
	}
}
