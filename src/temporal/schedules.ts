import { ScheduleNotFoundError, type Client } from '@temporalio/client';

/** Each harvest's Temporal Schedule is named after it. */
export function scheduleIdOf(harvest: string): string {
  return `harvest-${harvest}`;
}

/** Pauses a harvest's schedule with a note saying why; a harvest without a schedule is left alone. */
export async function pauseHarvestSchedule(client: Client, harvest: string, note: string): Promise<boolean> {
  try {
    await client.schedule.getHandle(scheduleIdOf(harvest)).pause(note);
    return true;
  } catch (error) {
    if (error instanceof ScheduleNotFoundError) return false;
    throw error;
  }
}

/** Every harvest schedule's id. */
export async function harvestScheduleIds(client: Client): Promise<string[]> {
  const ids: string[] = [];
  for await (const schedule of client.schedule.list()) if (schedule.scheduleId.startsWith('harvest-')) ids.push(schedule.scheduleId);
  return ids;
}
