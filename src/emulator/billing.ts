/** API keys, their balances and plans, and the ledger of every charge. */

export interface KeyAccount {
  apiKey: string;
  balance: number;
  plan: string;
  /** The plan's credits: what the key was created with or last set to. credits.low is 10% of it. */
  planCredits: number;
}

export interface LedgerEntry {
  request_id: string;
  api_key: string;
  endpoint: string;
  units: number;
  credits: number;
  at: string;
  job_id?: string;
}

/** Per-request context: who is calling and what they were charged. */
export interface CallContext {
  requestId: string;
  account: KeyAccount;
  charged: number;
}

export const LOW_CREDITS_FRACTION = 0.1;

export class Billing {
  private readonly accounts = new Map<string, KeyAccount>();
  readonly ledger: LedgerEntry[] = [];

  setKey(apiKey: string, credits: number, plan = 'default'): KeyAccount {
    const account: KeyAccount = { apiKey, balance: credits, plan, planCredits: credits };
    this.accounts.set(apiKey, account);
    return account;
  }

  get(apiKey: string): KeyAccount | undefined {
    return this.accounts.get(apiKey);
  }

  /** Charges an account. Returns true when the balance has just crossed below the low mark. */
  charge(account: KeyAccount, entry: Omit<LedgerEntry, 'api_key'>): boolean {
    if (entry.credits <= 0) return false;
    const threshold = account.planCredits * LOW_CREDITS_FRACTION;
    const before = account.balance;
    account.balance -= entry.credits;
    this.ledger.push({ ...entry, api_key: account.apiKey });
    return before >= threshold && account.balance < threshold;
  }

  ledgerFor(apiKey: string | undefined): LedgerEntry[] {
    return apiKey === undefined ? this.ledger : this.ledger.filter((entry) => entry.api_key === apiKey);
  }
}
