/**
 * The ledger of the budgets across runs in PostgreSQL, for workers on many machines (the same
 * contract as the data directory's file, ../budget-ledger.ts). A period is a row, locked (FOR
 * UPDATE, in the order of its key, so two reservations never wait on each other in a circle) by
 * the transaction that reserves against it: it reads the period's used credits (settled charges
 * plus every open reservation at its worst case), and inserts the reservation only if each period
 * has room, all in one commit. Settling or releasing moves the reservation's credits in the same
 * rows, once (a reservation already closed is left as it is). Leases are judged by the database's
 * clock: a reservation past its lease and still open counts as spent at its worst case.
 */
import type pg from 'pg';
import type { BudgetPeriod, BudgetRefusal, PeriodFigures } from '../../harvest/budgets.js';
import type { BudgetLedger, BudgetReservation } from '../budget-ledger.js';
import { CatalogError, type PostgresCatalog } from './postgres-catalog.js';

const SCHEMA = `
CREATE TABLE IF NOT EXISTS harvester_budget_period (
  budget text NOT NULL,
  period text NOT NULL,
  limit_credits bigint NOT NULL,
  settled bigint NOT NULL DEFAULT 0,
  open_credits bigint NOT NULL DEFAULT 0,
  PRIMARY KEY (budget, period)
);
CREATE TABLE IF NOT EXISTS harvester_budget_reservation (
  id text PRIMARY KEY,
  run_id text,
  credits bigint NOT NULL,
  lease_until timestamptz NOT NULL,
  settled bigint,
  released boolean NOT NULL DEFAULT false
);
CREATE TABLE IF NOT EXISTS harvester_budget_hold (
  id text NOT NULL,
  budget text NOT NULL,
  period text NOT NULL,
  PRIMARY KEY (id, budget, period)
);
CREATE INDEX IF NOT EXISTS harvester_budget_hold_period ON harvester_budget_hold (budget, period);`;

export class PostgresBudgetLedger implements BudgetLedger {
  private made: Promise<void> | undefined;

  constructor(private readonly catalog: PostgresCatalog) {}

  async reserve(reservation: BudgetReservation): Promise<BudgetRefusal | undefined> {
    await this.tables();
    const periods = [...reservation.periods].sort((a, b) => (a.budget === b.budget ? a.period.localeCompare(b.period) : a.budget.localeCompare(b.budget)));
    try {
      return await this.catalog.inTransaction(async (client) => {
        for (const period of periods) {
          await client.query('INSERT INTO harvester_budget_period (budget, period, limit_credits) VALUES ($1, $2, $3) ON CONFLICT DO NOTHING', [period.budget, period.period, period.limit]);
        }
        const refusal = await this.refusalOf(client, periods, reservation.credits);
        if (refusal) return refusal;
        await client.query("INSERT INTO harvester_budget_reservation (id, run_id, credits, lease_until) VALUES ($1, $2, $3, now() + $4 * interval '1 millisecond')", [reservation.id, reservation.run ?? null, reservation.credits, reservation.leaseMs]);
        for (const period of periods) {
          await client.query('INSERT INTO harvester_budget_hold (id, budget, period) VALUES ($1, $2, $3)', [reservation.id, period.budget, period.period]);
          await client.query('UPDATE harvester_budget_period SET open_credits = open_credits + $3, limit_credits = LEAST(limit_credits, $4) WHERE budget = $1 AND period = $2', [period.budget, period.period, reservation.credits, period.limit]);
        }
        return undefined;
      });
    } catch (error) {
      throw new CatalogError('reserve credits against a budget', this.catalog.where, error);
    }
  }

  async settle(id: string, credits: number): Promise<void> {
    await this.closeReservation(id, credits);
  }

  async release(id: string): Promise<void> {
    await this.closeReservation(id, undefined);
  }

  async figures(): Promise<PeriodFigures[]> {
    await this.tables();
    const result = await this.catalog.query(
      'read the budgets',
      `SELECT p.budget, p.period, p.limit_credits, p.settled, p.open_credits,
              coalesce(sum(r.credits) FILTER (WHERE r.lease_until <= now()), 0) AS expired_credits,
              count(r.id) FILTER (WHERE r.lease_until <= now()) AS expired
         FROM harvester_budget_period p
         LEFT JOIN harvester_budget_hold h ON h.budget = p.budget AND h.period = p.period
         LEFT JOIN harvester_budget_reservation r ON r.id = h.id AND r.settled IS NULL AND NOT r.released
        GROUP BY p.budget, p.period, p.limit_credits, p.settled, p.open_credits
        ORDER BY p.budget, p.period`,
      [],
    );
    return result.rows.map((row) => {
      const limit = Number(row.limit_credits);
      const spent = Number(row.settled) + Number(row.expired_credits);
      const reserved = Number(row.open_credits) - Number(row.expired_credits);
      return { budget: row.budget, period: row.period, limit, spent, reserved, left: Math.max(0, limit - spent - reserved), expired: Number(row.expired) };
    });
  }

  async close(): Promise<void> {
    // The catalog's pool is the store's, closed with it.
  }

  /** The first period (in lock order) that cannot take `credits` more, each locked until the transaction ends. */
  private async refusalOf(client: pg.PoolClient, periods: BudgetPeriod[], credits: number): Promise<BudgetRefusal | undefined> {
    for (const period of periods) {
      const row = (await client.query('SELECT limit_credits, settled, open_credits FROM harvester_budget_period WHERE budget = $1 AND period = $2 FOR UPDATE', [period.budget, period.period])).rows[0];
      const limit = Math.min(Number(row.limit_credits), period.limit);
      const used = Number(row.settled) + Number(row.open_credits);
      if (used + credits > limit) return { budget: period.budget, period: period.period, limit, spent: Number(row.settled), reserved: Number(row.open_credits), asked: credits };
    }
    return undefined;
  }

  /** Settles (at `credits`) or releases (undefined) a reservation still open; one that is closed stays as it is. */
  private async closeReservation(id: string, credits: number | undefined): Promise<void> {
    await this.tables();
    try {
      await this.catalog.inTransaction(async (client) => {
        const holds = (await client.query('SELECT budget, period FROM harvester_budget_hold WHERE id = $1 ORDER BY budget, period', [id])).rows as { budget: string; period: string }[];
        // The periods first, in the order reservations lock them: no circle of waits with a reservation.
        for (const hold of holds) await client.query('SELECT 1 FROM harvester_budget_period WHERE budget = $1 AND period = $2 FOR UPDATE', [hold.budget, hold.period]);
        const closed = await client.query(
          credits === undefined
            ? 'UPDATE harvester_budget_reservation SET released = true WHERE id = $1 AND settled IS NULL AND NOT released RETURNING credits'
            : 'UPDATE harvester_budget_reservation SET settled = $2 WHERE id = $1 AND settled IS NULL AND NOT released RETURNING credits',
          credits === undefined ? [id] : [id, credits],
        );
        if (closed.rowCount === 0) return;
        const worst = Number(closed.rows[0].credits);
        for (const hold of holds) {
          await client.query('UPDATE harvester_budget_period SET open_credits = open_credits - $3, settled = settled + $4 WHERE budget = $1 AND period = $2', [hold.budget, hold.period, worst, credits ?? 0]);
        }
      });
    } catch (error) {
      throw new CatalogError(credits === undefined ? 'release a budget reservation' : 'settle a budget reservation', this.catalog.where, error);
    }
  }

  private tables(): Promise<void> {
    this.made ??= this.catalog
      .inTransaction(async (client) => {
        await client.query('SELECT pg_advisory_xact_lock(7350043)');
        await client.query(SCHEMA);
      })
      .catch((error: unknown) => {
        this.made = undefined;
        throw new CatalogError('make the budget tables', this.catalog.where, error);
      });
    return this.made;
  }
}
