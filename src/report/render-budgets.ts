/**
 * The report's section on the budgets across runs: each budget's month, what its runs spent, what
 * calls in flight hold, what is left, and its month-end forecast, as `harvester budgets` gives them
 * (src/cli/budget-status.ts: the ledger's figures, not the lake's, which loads later).
 */
import { escapeHtml as h, number, section } from './format.js';

/** One budget's figures, as the report shows them. */
export interface ReportBudget {
  budget: string;
  period: string;
  timezone: string;
  limit: number;
  spent: number;
  reserved: number;
  left: number;
  forecast: { credits: number; runsOut: boolean };
}

export const BUDGETS_SECTION = { id: 'budgets', title: 'Budgets across runs' } as const;

export function budgetsSection(budgets: readonly ReportBudget[]): string {
  const description =
    "Each budget of the config's <code>budgets:</code> section this month (in its time zone): what the runs it covers spent (settled at the API's charge), what their calls in flight hold, what is left, and the month-end forecast from its harvests' schedules at their plans' expected credits.";
  const rows = budgets.map(
    (budget) => `<tr>
<td>${h(budget.budget)}</td>
<td>${h(budget.period)} (${h(budget.timezone)})</td>
<td class="num">${number(budget.limit)}</td>
<td class="num">${number(budget.spent)}</td>
<td class="num">${number(budget.reserved)}</td>
<td class="num">${number(budget.left)}</td>
<td class="num">${number(budget.forecast.credits)}</td>
<td>${budget.forecast.runsOut ? '<strong>runs out before the month ends</strong>' : 'holds'}</td>
</tr>`,
  );
  const table = `<table class="budgets-table">
<thead><tr><th>Budget</th><th>Month</th><th class="num">Credits</th><th class="num">Spent</th><th class="num">Reserved</th><th class="num">Left</th><th class="num">Month-end forecast</th><th></th></tr></thead>
<tbody>${rows.join('')}</tbody>
</table>`;
  return section(BUDGETS_SECTION.id, BUDGETS_SECTION.title, description, table);
}
