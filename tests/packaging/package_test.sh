#!/usr/bin/env bash
# The .deb (issue 16): built by CPack from this build tree, unpacked into a
# scratch root (no container, nothing installed on this machine), and checked
# for what landed: binaries that run, the unit, the commented example config
# that `zerod --check-config` accepts, man pages, bash completion, and the
# maintainer scripts. Usage: package_test.sh BUILD_DIR
set -euo pipefail
build=$(cd "$1" && pwd)
scratch=$(mktemp -d /tmp/zn-package-XXXXXX)
trap 'rm -rf "$scratch"' EXIT
fail() { echo "package_test: $*" >&2; exit 1; }

(cd "$build" && cpack -G DEB -B "$scratch/out" > "$scratch/cpack.log" 2>&1) || { cat "$scratch/cpack.log"; fail "cpack failed"; }
deb=$(ls "$scratch"/out/zeroness_*.deb 2>/dev/null | head -1)
[ -n "$deb" ] || fail "no .deb in $scratch/out"
dpkg-deb --info "$deb" > "$scratch/info"
grep -q "Package: zeroness" "$scratch/info" || fail "not the zeroness package"
grep -q "Depends:.*libc6" "$scratch/info" || fail "no shared-library dependencies (shlibdeps)"
# Listings are read whole before they are searched: `producer | grep -q`
# under pipefail fails when grep stops reading at its match while the
# producer still writes (SIGPIPE; seen under load).
controls=$(dpkg-deb --ctrl-tarfile "$deb" | tar -t)
grep -q postinst <<< "$controls" || fail "no postinst"

root="$scratch/root"
dpkg-deb -x "$deb" "$root"
for f in usr/sbin/zerod usr/sbin/znctl usr/lib/zeroness/zn-agent usr/lib/systemd/system/zerod.service \
         usr/share/zeroness/zerod.example.json usr/share/bash-completion/completions/znctl \
         usr/share/man/man8/zerod.8.gz usr/share/man/man8/znctl.8.gz usr/share/doc/zeroness/README.md \
         usr/share/doc/zeroness/operator-guide.md; do
  [ -e "$root/$f" ] || fail "missing /$f"
done
[ -x "$root/usr/sbin/zerod" ] && [ -x "$root/usr/sbin/znctl" ] || fail "binaries not executable"
"$root/usr/sbin/zerod" --check-config --config "$root/usr/share/zeroness/zerod.example.json" \
  || fail "the packaged example config does not pass zerod --check-config"
# A bad config is refused with its field.
echo '{"audit_sinks":[{"name":"x","type":"file"}]}' > "$scratch/bad.json"
if out=$("$root/usr/sbin/zerod" --check-config --config "$scratch/bad.json" 2>&1); then
  fail "zerod --check-config accepted a file sink without a path"
fi
grep -q 'audit_sinks\[0\].path' <<< "$out" || fail "the refusal does not name the field: $out"
help=$("$root/usr/sbin/znctl" --help 2>&1)
grep -q "audit verify" <<< "$help" || fail "znctl --help lacks audit verify"
man=$(zcat "$root/usr/share/man/man8/znctl.8.gz")
grep -q "audit" <<< "$man" || fail "znctl's man page lacks its verbs"
grep -q '^Type=notify' "$root/usr/lib/systemd/system/zerod.service" || fail "the unit is not Type=notify"
grep -q '^ExecStart=/usr/sbin/zerod' "$root/usr/lib/systemd/system/zerod.service" || fail "ExecStart does not run /usr/sbin/zerod"
# bash completion completes objects and an object's verbs from the packaged znctl.
completions=$(PATH="$root/usr/sbin:$PATH" bash -c '
  source "$1"
  COMP_WORDS=(znctl au); COMP_CWORD=1; _znctl; echo "${COMPREPLY[*]}"
  COMP_WORDS=(znctl audit ve); COMP_CWORD=2; _znctl; echo "${COMPREPLY[*]}"' _ "$root/usr/share/bash-completion/completions/znctl")
grep -q "^audit" <<< "$completions" || fail "completion does not offer 'audit': $completions"
grep -q "verify" <<< "$completions" || fail "completion does not offer 'audit verify': $completions"
echo "package_test: $(basename "$deb") ok ($(dpkg-deb -c "$deb" | wc -l) entries)"
