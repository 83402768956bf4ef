#!/bin/sh
# The egress proxy's latency per request with its log followed through the
# engine (as the manager's egress follower does: the engine's logs API,
# follow, timestamps) against without, on a network of its own with a local
# web server (nothing leaves the machine). Rounds alternate without/with;
# each prints the wall time per request seen by a client container (one
# wget each) and squid's own mean time per request (the ms field of its
# log lines).
#
#   AFE_PROXY_IMAGE  the proxy image (default afe/egress-proxy:dev)
#   N                requests per round (default 300)
#   ROUNDS           rounds of each kind (default 3)
set -eu
img="${AFE_PROXY_IMAGE:-afe/egress-proxy:dev}"
n="${N:-300}"
rounds="${ROUNDS:-3}"
id="afe-egress-latency-$$"
label="afe.test=${id}"
follower=""
cleanup() {
	[ -z "${follower}" ] || kill "${follower}" 2>/dev/null || true
	docker ps -aq --filter "label=${label}" | xargs -r docker rm -f >/dev/null
	docker network rm "${id}" >/dev/null 2>&1 || true
}
trap cleanup EXIT INT TERM
# squid's configuration as the controller renders it (internal/egress).
config="$(cd "$(dirname "$0")/.." && go run ./hack/egressconfig -allow-private allowed.test)"
docker network create --label "${label}" "${id}" >/dev/null
docker run -d --label "${label}" --name "${id}-web" --network "${id}" --network-alias allowed.test \
	afe/busybox:dev sh -c "mkdir -p /www && echo web-ok > /www/index.html && exec httpd -f -p 80 -h /www" >/dev/null
docker run -d --label "${label}" --name "${id}-client" --network "${id}" --user 1000:1000 afe/busybox:dev sleep 3600 >/dev/null
docker run -d --label "${label}" --name "${id}-proxy" --network "${id}" --cap-drop ALL --security-opt no-new-privileges \
	--read-only --tmpfs /tmp -e AFE_EGRESS_HOSTS=allowed.test -e AFE_EGRESS_CONFIG="${config}" "${img}" >/dev/null
until docker exec "${id}-proxy" afe-proxy-probe 2>/dev/null; do sleep 0.2; done

# round KIND: N requests, then the figures of their log lines.
round() {
	before="$(docker logs "${id}-proxy" 2>/dev/null | grep -c '^afe-egress v1 ' || true)"
	start="$(date +%s%N)"
	docker exec -e "http_proxy=http://${id}-proxy:3128" "${id}-client" sh -c \
		"i=0; while [ \$i -lt ${n} ]; do wget -q -O /dev/null http://allowed.test/ || exit 1; i=\$((i+1)); done"
	end="$(date +%s%N)"
	squid_ms="$(docker logs "${id}-proxy" 2>/dev/null | grep '^afe-egress v1 ' | tail -n "+$((before + 1))" |
		sed -n 's/.* ms=\([0-9]*\) .*/\1/p' | awk '{s+=$1; c++} END {printf "%.3f", s/c}')"
	echo "$1: $(((end - start) / n / 1000)) us per request (client wall), squid's own ${squid_ms} ms mean"
}
i=0
while [ "${i}" -lt "${rounds}" ]; do
	round "without the log read"
	docker logs -f --timestamps "${id}-proxy" >/dev/null 2>&1 &
	follower=$!
	round "with the log read   "
	kill "${follower}"
	wait "${follower}" 2>/dev/null || true
	follower=""
	i=$((i + 1))
done
