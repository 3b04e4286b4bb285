#!/bin/sh
# Creates Temporal's two databases beside the application's and brings their schemas to the
# version the admin-tools image ships (the server image's own version). Run by the one-shot
# `temporal-schema` service of docker-compose.yml before the server starts; safe to re-run:
# an existing database is kept and update-schema applies only what is missing.
set -eu

sql() {
    temporal-sql-tool --plugin postgres12 --ep "$POSTGRES_SEEDS" -p "$DB_PORT" \
        -u "$POSTGRES_USER" "$@"
}

for database in "$DBNAME" "$VISIBILITY_DBNAME"; do
    if ! out=$(sql --db "$database" create 2>&1); then
        case "$out" in
            *"already exists"*) echo "database $database exists" ;;
            *) echo "$out" >&2; exit 1 ;;
        esac
    fi
done

sql --db "$DBNAME" setup-schema -v 0.0
sql --db "$DBNAME" update-schema -d /etc/temporal/schema/postgresql/v12/temporal/versioned
sql --db "$VISIBILITY_DBNAME" setup-schema -v 0.0
sql --db "$VISIBILITY_DBNAME" update-schema -d /etc/temporal/schema/postgresql/v12/visibility/versioned
echo "temporal schema ready"
