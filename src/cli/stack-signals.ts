/**
 * SIGINT and SIGTERM for a command that starts the local stack (src/cli/stack.ts) as its children:
 * `harvester dev` and `harvester demo`. Listened to from the command's start, before any child
 * process: with Node's default (dying at once) the command ended and left what it had started
 * behind (the Temporal dev server, the emulator, the receiver, a worker still harvesting, and
 * PostgreSQL), with no process left to stop them.
 */

/**
 * Resolves with the first SIGINT or SIGTERM. The listeners stay for as long as the command runs: a
 * later signal (while the stack starts or stops) is said on stderr, and the stop goes on. `command`
 * names the command in what is said; `isUp` says whether the stack is up yet (a signal while it
 * starts stops it once it is up: startStack cannot be cut short halfway).
 */
export function untilStopSignal(command: string, isUp: () => boolean): Promise<NodeJS.Signals> {
  return new Promise<NodeJS.Signals>((resolve) => {
    let signalled = false;
    const onSignal = (signal: NodeJS.Signals) => {
      if (signalled) process.stderr.write(`${command}: still stopping the stack (each process gets 10 s before SIGKILL)…\n`);
      else if (!isUp()) process.stderr.write(`${command}: stopping once the stack is up…\n`);
      signalled = true;
      resolve(signal);
    };
    process.on('SIGINT', onSignal);
    process.on('SIGTERM', onSignal);
  });
}
