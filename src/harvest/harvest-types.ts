/**
 * What a harvest config file (config/harvests.yaml) describes, after loading and checking by
 * ../config/harvest-config.ts. Pure types, no runtime imports: Temporal workflows import this module.
 */
import type { HarvestSchemaContract } from './schema-contract.js';
import type { CrossRunBudget } from './budgets.js';

export type ContentKind = 'videos' | 'posts' | 'reels';

/** A channel's list: `videos` on tiktok, `posts` or `reels` on instagram. */
export interface ChannelTarget {
  platform: 'tiktok' | 'instagram';
  /** Without a leading @. */
  handle: string;
  content: ContentKind;
  max_items: number;
}

/** Exactly one of `query` (keyword search) or `hashtag` (tiktok only, stored without #). */
export interface SearchTarget {
  platform: 'tiktok' | 'instagram';
  query?: string;
  hashtag?: string;
  max_results: number;
}

/** Comments of one item; the platform is derived from the URL. */
export interface CommentTarget {
  url: string;
  platform: 'tiktok' | 'instagram';
  max_items: number;
}

/** Extra calls per harvested item. `comments: true` in the file means 20 per item. */
export interface Enrichment {
  stats: boolean;
  comments: false | { max_per_item: number };
  transcript: boolean;
  summary: boolean;
  download: boolean;
}

export interface Harvest {
  name: string;
  schedule?: { cron: string; timezone: string };
  /** Hard cap of credits one run may spend. */
  budget: { credits: number };
  channels: ChannelTarget[];
  searches: SearchTarget[];
  comments: CommentTarget[];
  enrich: Enrichment;
  /** Targets wanting more items than this are fetched with an async job (default 500). */
  job_threshold: number;
  /** Targets listed at once, and enrichment calls in flight, per run (defaults 8 and 16). */
  concurrency: { targets: number; calls: number };
  /**
   * How long one billed call may take in all, its retries included (default 120). Absent from runs
   * started before the setting existed, which take the default.
   */
  call_deadline_seconds?: number;
  /**
   * What each run observes again besides what it lists: `accounts`, each channel's profile
   * (channel-stats) once per run; `items`, the stats of the harvest's items posted within `days`,
   * as they age (src/harvest/tracking.ts). Absent from runs started before the setting existed.
   */
  track?: Tracking;
  /**
   * What a load does with a field the API's answers carry beyond their resource's schema: `evolve`
   * (absent: the default), `freeze` or `discard`, for all resources or by resource (schema-contract.ts).
   */
  schema_contract?: HarvestSchemaContract;
  /**
   * The budgets across runs that cover this harvest (the config's `budgets:` section, attached when
   * the config is read): each of its calls is reserved against all of them. Absent when none does.
   */
  budgets?: CrossRunBudget[];
}

export interface Tracking {
  accounts: boolean;
  items?: { days: number };
}

export interface HarvestConfig {
  file: string;
  harvests: Harvest[];
  /** The config's budgets across runs (src/harvest/budgets.ts); none when it has no `budgets:` section. */
  budgets?: CrossRunBudget[];
}
