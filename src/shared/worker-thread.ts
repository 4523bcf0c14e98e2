// What the service's worker threads share.

/**
 * Items for another thread, sent as one message per turn of the event loop:
 * a message costs far more than an item in it, and what one turn produces
 * (the attempts a claim starts, the answers a poll of sockets brings) is
 * usually many.
 */
export function perTurn<Item>(send: (items: Item[]) => void): { add(item: Item): void; flush(): void } {
  let items: Item[] = [];
  const flush = () => {
    if (items.length === 0) return;
    const batch = items;
    items = [];
    send(batch);
  };
  return {
    add(item) {
      if (items.length === 0) setImmediate(flush);
      items.push(item);
    },
    flush,
  };
}
