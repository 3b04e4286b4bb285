#!/bin/sh
# Registers the namespace the workers use, once: the one-shot `temporal-namespace` service of
# docker-compose.yml runs it after the server's port opens. Re-runs leave an existing
# namespace be. The frontend refuses calls for a few seconds after it starts listening, so
# each step is retried for up to a minute before the service fails.
set -eu

attempt=1
until temporal operator cluster health >/dev/null 2>&1; do
    if [ "$attempt" -ge 30 ]; then
        temporal operator cluster health  # shows the error
        exit 1
    fi
    attempt=$((attempt + 1))
    sleep 2
done

if temporal operator namespace describe --namespace "$NAMESPACE" >/dev/null 2>&1; then
    echo "namespace $NAMESPACE exists"
else
    temporal operator namespace create --namespace "$NAMESPACE" --retention "$RETENTION"
fi
