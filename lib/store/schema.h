// schema.h: creating and migrating the store's schema (used by Store::open; docs/store.md lists every column).
// Internal to lib/store: include store/store.h.
#pragma once

#include <cstdint>

#include "store/store.h"

namespace prophet {

struct StoreImpl;

// The SQL that created a version-1 store; a new store is created with it and then migrated like an old file, so
// the migration path runs on every new store.
const char* store_schema_v1();

// Brings a store of `from_version` (>= 1) to kStoreSchemaVersion and sets user_version, inside the caller's open
// transaction (all or nothing). Foreign keys must be off on the connection (PRAGMA foreign_keys is a no-op inside
// a transaction, so the caller turns it off before BEGIN); the function checks them before returning. Throws
// prophet::Error (exit 5) when a statement fails or a foreign key is broken.
void migrate_schema(StoreImpl& db, int64_t from_version);

}  // namespace prophet
