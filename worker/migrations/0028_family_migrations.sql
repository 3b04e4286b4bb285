-- The migrations of job families' own packages (a family's `migrations/` folder: a user's
-- package, installed beside this one), applied by `python -m worker migrate` after the
-- engine's own (`schema_migrations`, which keeps its rows), one row per family and version:
-- each family numbers its migrations from 0001 on its own (docs/jobs.md).
CREATE TABLE family_migrations (
    family     text        NOT NULL,
    version    integer     NOT NULL,
    name       text        NOT NULL,
    checksum   text        NOT NULL,
    applied_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (family, version)
);
