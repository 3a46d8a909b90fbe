#!/usr/bin/env bash
# Prints the kubeconfig a managed cluster's policyhub-agent uses on the hub: the hub's server and
# CA from the current kubectl context (the hub), and a new token of the cluster's agent
# ServiceAccount there (the policyhub-agent chart's hubAccess), valid for DURATION (48h).
#
#   hack/agent-hub-kubeconfig.sh CLUSTER [DURATION] > CLUSTER-hub.kubeconfig
#
# Run it again before the token expires and replace the agent's Secret with its output: the agent
# reads the new token without a restart (docs/agent.md, "Rotating the agents' tokens").
# KUBECTL (default kubectl) talks to the hub; HUB_SERVER overrides the server the agent is given
# (when the hub's address from the managed cluster differs from yours); AGENT_SERVICE_ACCOUNT is
# hubAccess.serviceAccountName (policyhub-agent).
set -euo pipefail

cluster=${1:?usage: $0 CLUSTER [DURATION]}
duration=${2:-48h}
kubectl=${KUBECTL:-kubectl}
sa=${AGENT_SERVICE_ACCOUNT:-policyhub-agent}

view() { $kubectl config view --minify --raw -o jsonpath="{.clusters[0].cluster.$1}"; }
server=${HUB_SERVER:-$(view server)}
ca=$(view certificate-authority-data)
if [[ -z $ca ]]; then
	caFile=$(view certificate-authority)
	if [[ -n $caFile ]]; then ca=$(base64 -w0 <"$caFile"); fi
fi
token=$($kubectl -n "$cluster" create token "$sa" --duration="$duration")

echo "apiVersion: v1"
echo "kind: Config"
echo "clusters:"
echo "- name: hub"
echo "  cluster:"
echo "    server: $server"
if [[ -n $ca ]]; then echo "    certificate-authority-data: $ca"; fi
echo "users:"
echo "- name: $cluster-agent"
echo "  user:"
echo "    token: $token"
echo "contexts:"
echo "- name: hub"
echo "  context: {cluster: hub, user: $cluster-agent}"
echo "current-context: hub"
