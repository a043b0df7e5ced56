#!/bin/sh
# ctest deploy_k8s: installs the pinned validator (package-lock.json) into BUILD/deploy-validate,
# validates deploy/k8s/*.yaml, and checks that every manifest in tests/deploy/bad is rejected
# with the problems its "# expect:" lines name. Exit 77 (skipped) if npm cannot reach its registry.
set -u
src=$1 build=$2
here=$src/tests/deploy
dir=$build/deploy-validate
mkdir -p "$dir"
if ! cmp -s "$here/package-lock.json" "$dir/package-lock.json" || [ ! -d "$dir/node_modules/kubernetes-models" ]; then
    cp "$here/package.json" "$here/package-lock.json" "$dir/"
    if ! npm ci --prefix "$dir" --no-audit --no-fund --fetch-retries=1 --fetch-timeout=30000 >"$dir/npm.log" 2>&1; then
        rm -f "$dir/package-lock.json"
        if grep -Eq 'ENOTFOUND|EAI_AGAIN|ECONNREFUSED|ETIMEDOUT|ECONNRESET|ENETUNREACH|network|offline' "$dir/npm.log"; then
            echo "SKIP: npm cannot reach its registry ($(npm config get registry)); the manifests were not validated."
            echo "To run it: with the registry reachable, ctest --test-dir $build -L deploy"
            echo "  (or: npm ci --prefix $dir && node $here/validate.mjs --modules $dir $src/deploy/k8s/*.yaml)"
            tail -n 3 "$dir/npm.log"
            exit 77
        fi
        echo "FAIL: npm ci failed (log: $dir/npm.log):"
        tail -n 20 "$dir/npm.log"
        exit 1
    fi
fi
status=0
node "$here/validate.mjs" --modules "$dir" "$src"/deploy/k8s/*.yaml || status=1
for bad in "$here"/bad/*.yaml; do
    out=$(node "$here/validate.mjs" --modules "$dir" "$bad")
    rc=$?
    if [ $rc -ne 1 ]; then
        echo "FAIL: $bad: the validator exited $rc, expected 1 (rejected):"; echo "$out"; status=1; continue
    fi
    grep '^# expect: ' "$bad" | sed 's/^# expect: //' | while IFS= read -r want; do
        printf '%s\n' "$out" | grep -qF -- "$want" || { echo "FAIL: $bad: no problem \"$want\" in:"; echo "$out"; exit 1; }
    done || status=1
    [ $status -eq 0 ] && echo "rejected as expected: $bad"
done
exit $status
