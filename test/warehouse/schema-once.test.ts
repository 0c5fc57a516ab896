/**
 * The resource schema is described once (issue 42): the API catalog's RESOURCE_SCHEMAS. What the load
 * reads of an answer (raw-columns.ts) and what the drift check knows (schema-drift.ts) are derived
 * from it, so a resource added there is in both, and neither knows a member it lacks. (The emulator's
 * answers are held to the same table in test/emulator/content.test.ts.)
 */
import { describe, expect, it } from 'vitest';
import { ENDPOINTS } from '../../src/api-catalog/endpoints.js';
import { RESOURCE_SCHEMAS } from '../../src/api-catalog/resources.js';
import { LANDED_RESOURCES, RAW_COLUMNS, structPaths } from '../../src/warehouse/raw-columns.js';
import { KNOWN_PATHS } from '../../src/warehouse/schema-drift.js';

const names = (shape?: 'list' | 'object') => [...new Set(ENDPOINTS.filter((spec) => shape === undefined || spec.shape === shape).map((spec) => spec.name))].sort();

describe('the resource schema, described once', () => {
  it('names a resource for every endpoint, and drift knows the same resources', () => {
    expect(Object.keys(RESOURCE_SCHEMAS).sort()).toEqual(names());
    expect(Object.keys(LANDED_RESOURCES).sort()).toEqual(names());
    expect(Object.keys(KNOWN_PATHS).sort()).toEqual(names());
  });

  it('reads with each shape exactly the members the resources of that shape name, which are what drift knows', () => {
    for (const shape of ['list', 'object'] as const) {
      const read = new Set(structPaths(RAW_COLUMNS[shape].data as string));
      const known = new Set(names(shape).flatMap((name) => [...KNOWN_PATHS[name]]));
      expect([...read].sort(), shape).toEqual([...known].sort());
    }
    // A member of one resource (stats' metrics.shares) is known to it alone: drift is per resource.
    expect(KNOWN_PATHS.stats.has('$.metrics.shares')).toBe(true);
    expect(KNOWN_PATHS['channel-stats'].has('$.metrics.shares')).toBe(false);
    // What the harvester adds as it lands (a download's stored media) is read and known.
    expect(KNOWN_PATHS.download.has('$.media.sha256')).toBe(true);
  });

  it('types the members as the API writes them', () => {
    expect(RAW_COLUMNS.list.data).toMatch(/^STRUCT\(.*\)\[\]$/);
    expect(RAW_COLUMNS.list.data).toContain('"posted_at" TIMESTAMPTZ');
    expect(RAW_COLUMNS.object.data).toContain('"segments" STRUCT("start" DOUBLE, "end" DOUBLE, "text" VARCHAR)[]');
    expect(RAW_COLUMNS.object.data).toContain('"verified" BOOLEAN');
    expect(RAW_COLUMNS.object.data).toContain('"followers" BIGINT');
  });
});
