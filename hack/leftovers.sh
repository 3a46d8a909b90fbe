#!/usr/bin/env bash
# Fails when a process started by a local fleet (etcd, kube-apiserver, cluster-gateway, Kyverno) is
# still running. Every fleet keeps its files under a directory named policyhub-fleet-*, and every
# process it starts has that directory in its command line, so that is what is looked for.
set -euo pipefail
left=$(pgrep -af 'policyhub-fleet-' | grep -v -e pgrep -e leftovers.sh || true)
if [ -n "$left" ]; then
	echo "leftovers: processes started by a local fleet are still running:" >&2
	echo "$left" >&2
	exit 1
fi
echo "leftovers: no fleet process is running"
