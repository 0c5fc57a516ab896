/** The benchmarks' shared arithmetic over repeated measurements. */

/** The median; for an even count, the mean of the two middle values. */
export function median(values) {
  const sorted = [...values].sort((a, b) => a - b);
  const middle = Math.floor(sorted.length / 2);
  return sorted.length % 2 ? sorted[middle] : (sorted[middle - 1] + sorted[middle]) / 2;
}
