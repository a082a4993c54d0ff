#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# Every default of smcrd's settings that a document states is the one in
# effect: smcrd started with only an export prints its settings ("smcrctl
# status smcrd", the "settings:" line, from server/smcrd-conf.c's
# config_defaults()); smcrd --help, smcrd(8) OPTIONS, smcrd.conf(5) and
# smcrd.conf.example may each state a setting's default, and where one does it must be that
# value.  A setting the status shows as "auto" or "-" (worked out later,
# or none) is described, not a value: the documents that give it a value
# must agree with each other.  How a document states a default:
#   --help, smcrd(8)     "(default VALUE" or "VALUE (default)" / "VALUE (the
#                        default"; "(default: words)" describes, not checked
#   smcrd.conf(5)        "Default: VALUE." or "Default: VALUE (" in the
#                        key's GLOBAL SETTINGS entry, VALUE a number, a
#                        size or a word of a setting's values (yes, off,
#                        auto, info, ...); other words describe
#   smcrd.conf.example   "#key = VALUE" (or "key = VALUE") with no comment
#                        after it; "key = VALUE   # ..." is an example
# Sizes compare as bytes (256M = 268435456).
# smcr-timeout: 60
. "${srcdir:-.}/functions.sh"
. "$srcdir/test-smcrd-lib.sh"
requires python3 --version

d=$(scratch_dir)
export SMCR_CTL_DIR=$d/ctl
mkdir -p "$SMCR_CTL_DIR"
"$SMCRD" --help >"$d/help" 2>&1 || fail "smcrd --help: exit $?"
start_smcrd_disk 1M
sock=$SMCR_CTL_DIR/smcrd.$SMCRD_PID.sock
wait_for 10 test -S "$sock"
ctl_ask "$sock" 'status\n' >"$d/status" || fail "no status from the control socket"
stop_smcrd
grep '^settings: ' "$d/status" >"$d/settings" || fail "status has no settings line"

# The settings of smcrd_settings[]: name and long option.
sed -n '/^const struct cfg_setting smcrd_settings\[\]/,/^};/p' "$abs_top_srcdir/server/smcrd-conf.c" |
    sed -E -n 's/^\t(SET|ENUM)\("([a-z-]+)", (NULL|"([a-z-]+)"|[a-z_]+),.*/\2 \4/p' >"$d/names"
[ "$(wc -l <"$d/names")" -ge 27 ] || fail "found only $(wc -l <"$d/names") smcrd settings"

python3 - "$d/names" "$d/settings" "$d/help" "$abs_top_srcdir/man/smcrd.8" \
    "$abs_top_srcdir/server/smcrd.conf.example" "$abs_top_srcdir/man/smcrd.conf.5" <<'PY' >"$d/out" || { cat "$d/out"; fail "defaults differ"; }
import re, sys

names_f, settings_f, help_f, man_f, conf_f, man5_f = sys.argv[1:]
# Given by start_smcrd: not defaults.
given = {"listen", "port"}
names = []
for line in open(names_f):
    f = line.split()
    names.append((f[0], f[1] if len(f) > 1 else f[0]))
status = {}
for item in open(settings_f).read()[len("settings: "):].strip().split(", "):
    k, _, v = item.partition(" ")
    status[k] = v

def norm(v):
    v = v.strip().strip(".")
    m = re.fullmatch(r"(\d+)([KMGT])i?B?", v, re.I)
    if m:
        return str(int(m.group(1)) << (10 * "KMGT".index(m.group(2).upper()) + 10))
    return v

def stated(text):
    """The defaults a paragraph states as values."""
    out = set()
    for m in re.finditer(r"\(default ([^\s;:,)]+)", text):
        out.add(norm(m.group(1)))
    for m in re.finditer(r"(\S+) \((?:the )?default[;),]", text):
        out.add(norm(m.group(1)))
    return out

def man_plain(s):
    s = re.sub(r"\\f[BIRP]", "", s).replace("\\-", "-").replace("\\e", "\\")
    return re.sub(r"^\.(BR?|IR?|RB|RI|BI|IB) ", "", s, flags=re.M)

# --help: an option's text runs to the next option line.
help_lines = open(help_f).read().split("\n")
def help_para(opt):
    out, inside = [], False
    for line in help_lines:
        if re.match(r"^ {2,8}(-\w, )?--[a-z]", line):
            inside = re.match(r"^ +(-\w, )?--" + re.escape(opt) + r"(?![a-z-])", line) is not None
        elif not line.strip():
            inside = False
        if inside:
            out.append(line)
    return " ".join(" ".join(out).split())

# smcrd(8) OPTIONS: .TP, the option's line, its text to the next .TP.
man = open(man_f).read()
opts = man[man.index(".SH OPTIONS"):man.index(".SH CONFIG FILE")]
man_paras = {}
for para in opts.split(".TP\n")[1:]:
    head, _, body = para.partition("\n")
    for m in re.finditer(r"\\-\\-([a-z\\-]+)", head):
        man_paras.setdefault(m.group(1).replace("\\-", "-"), " ".join(man_plain(body).split()))

# smcrd.conf(5) GLOBAL SETTINGS: .TP, '.BI "key = " ...', its text.
man5 = open(man5_f).read()
glob5 = man5[man5.index(".SH GLOBAL SETTINGS"):man5.index(".SH EXPORT SETTINGS")]
words = {"yes", "no", "on", "off", "auto", "bpf", "require", "error", "warning", "info", "debug"}
man5_vals = {}
for para in glob5.split(".TP\n")[1:]:
    head, _, body = para.partition("\n")
    m = re.match(r'^\.BI "([a-z\\-]+) = "', head)
    if not m:
        continue
    key = m.group(1).replace("\\-", "-")
    m = re.search(r"Default: ([^\s.;,()]+)(\.|\s\()", " ".join(man_plain(body).split()))
    if m and (re.fullmatch(r"\d+([KMGT]i?B?)?", m.group(1), re.I) or m.group(1) in words):
        man5_vals[key] = norm(m.group(1))

conf = {}
for line in open(conf_f):
    m = re.match(r"^#?([a-z-]+) = (\S+)\s*$", line)
    if m:
        conf[m.group(1)] = norm(m.group(2))

bad, checked = [], 0
for name, opt in names:
    if name in given:
        continue
    if name not in status:
        bad.append(f"{name}: not in the status settings line")
        continue
    val = norm(status[name])
    docs = {}
    for where, vals in (("--help", stated(help_para(opt))),
                        ("smcrd(8)", stated(man_paras.get(opt, ""))),
                        ("smcrd.conf(5)", {man5_vals[name]} if name in man5_vals and val != "-" else set()),
                        ("smcrd.conf.example", {conf[name]} if name in conf else set())):
        if len(vals) > 1:
            bad.append(f"{name}: {where} states defaults {sorted(vals)}")
        for v in vals:
            docs[where] = v
    if val in ("auto", "-"):
        if len(set(docs.values())) > 1:
            bad.append(f"{name}: the documents differ: {docs}")
        checked += len(docs) > 1
        continue
    for where, v in docs.items():
        if v != val:
            bad.append(f"{name}: {where} says default {v}, smcrd's is {val}")
    checked += bool(docs)
for b in bad:
    print(b)
print(f"{checked} settings' defaults checked ({len(man5_vals)} stated in smcrd.conf(5))")
sys.exit(1 if bad else 0)
PY
echo "PASS: $(cat "$d/out"): --help, smcrd(8), smcrd.conf(5) and smcrd.conf.example state the defaults in effect"
