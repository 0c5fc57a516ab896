import { EnvironmentError } from '../config/environment.js';
import { outageWaitMs } from './outage.js';
import { LocalStore, type Store } from './store.js';
import type { StoreIdentity } from './store-identity.js';

/**
 * The store this process's environment names:
 * - HARVESTER_STORAGE unset, or a directory: that directory (or HARVESTER_DATA_DIR, or ./data) as
 *   a LocalStore, the embedded default;
 * - HARVESTER_STORAGE=s3://bucket/prefix with HARVESTER_CATALOG=postgres://…: a SharedStore, with
 *   `dataDir` as this process's scratch directory. The AWS_* variables configure the object store.
 * Shared storage's modules are loaded only when asked for: the default does not pay for them.
 */
export async function storeFromEnvironment(dataDir: string, env: NodeJS.ProcessEnv = process.env): Promise<Store> {
  const storage = env.HARVESTER_STORAGE;
  if (storage === undefined || !storage.startsWith('s3://')) {
    if (env.HARVESTER_CATALOG) throw new EnvironmentError('HARVESTER_CATALOG is set but HARVESTER_STORAGE is not s3://bucket/prefix: a shared catalog needs shared storage beside it (or unset HARVESTER_CATALOG for the data directory)');
    return new LocalStore(dataDir);
  }
  const catalogUrl = sharedCatalogUrl(env);
  const [{ ObjectStorage }, { objectStorageSettings }, { PostgresCatalog }, { SharedStore }] = await Promise.all([
    import('./shared/object-storage.js'),
    import('./shared/shared-settings.js'),
    import('./shared/postgres-catalog.js'),
    import('./shared/shared-store.js'),
  ]);
  const objects = new ObjectStorage(objectStorageSettings(storage, env));
  return new SharedStore(dataDir, objects, await PostgresCatalog.open(catalogUrl), outageWaitMs(env));
}

/** HARVESTER_CATALOG, checked, for shared storage. */
function sharedCatalogUrl(env: NodeJS.ProcessEnv): string {
  const catalogUrl = env.HARVESTER_CATALOG;
  if (!catalogUrl) throw new EnvironmentError('HARVESTER_STORAGE is s3://… but HARVESTER_CATALOG is not set: give the postgres:// URL of the shared catalog');
  if (!/^postgres(ql)?:\/\//.test(catalogUrl)) throw new EnvironmentError('HARVESTER_CATALOG is not a postgres:// URL (value not shown: it may hold a password)');
  return catalogUrl;
}

/**
 * The identity of the shared store `storage` (s3://bucket/prefix) and HARVESTER_CATALOG name, as
 * SharedStore.identity() gives it, without the object store's client: for a command that only
 * starts a run (`harvester run --no-local-worker`).
 */
export async function sharedStoreIdentity(storage: string, env: NodeJS.ProcessEnv = process.env): Promise<StoreIdentity> {
  const catalogUrl = sharedCatalogUrl(env);
  const [{ objectStorageSettings, storageRootUrl }, { PostgresCatalog }] = await Promise.all([import('./shared/shared-settings.js'), import('./shared/postgres-catalog.js')]);
  const root = storageRootUrl(objectStorageSettings(storage, env));
  const catalog = await PostgresCatalog.open(catalogUrl);
  try {
    return await catalog.storeIdentity(root);
  } finally {
    await catalog.close();
  }
}
