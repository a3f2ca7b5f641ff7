// node-redis (the npm package `redis`, with its `bf` commands) against lcbloom, side by side
// with RedisBloom 2.8.2: the same calls through the same client give the same replies. Run by
// tests/it/node_clients.rs (part of `make test`), which starts the servers and passes their
// ports; this file only connects to them.
//
// - LCBLOOM_TEST_PORT: a server with lcbloom (fixed hash seed);
// - REDISBLOOM_TEST_PORT: a server with RedisBloom 2.8.2;
// - LCBLOOM_TEST_CLUSTER: three cluster nodes with lcbloom, comma-separated ports.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createClient, createCluster, ErrorReply, RESP_TYPES } from 'redis';

function harnessPort(name) {
  const value = process.env[name];
  if (!value) {
    throw new Error(`${name} is not set: run these tests through the Rust harness `
      + '(cargo test --release --test it node_clients)');
  }
  return value;
}

const LCBLOOM = Number(harnessPort('LCBLOOM_TEST_PORT'));
const REDISBLOOM = Number(harnessPort('REDISBLOOM_TEST_PORT'));
const CLUSTER = harnessPort('LCBLOOM_TEST_CLUSTER').split(',').map(Number);
// node-redis 6 speaks RESP3 unless told otherwise; RESP2 is what older clients speak.
const PROTOCOLS = [undefined, 2, 3];

async function connect(port, RESP) {
  const client = createClient({ socket: { host: '127.0.0.1', port }, RESP });
  client.on('error', () => {});
  await client.connect();
  return client;
}

// Runs `body(client)` on a fresh database of the server on `port`.
async function withClient(port, RESP, body) {
  const client = await connect(port, RESP);
  try {
    await client.flushAll();
    return await body(client);
  } finally {
    client.destroy();
  }
}

// Each call's reply, or its error reply's class and message, in order.
function recorder() {
  const replies = [];
  const record = async (name, call) => {
    try {
      replies.push([name, await call()]);
    } catch (error) {
      // Only the server's error replies are answers; a failed check fails the test.
      if (!(error instanceof ErrorReply)) {
        throw error;
      }
      replies.push([name, error.constructor.name, error.message]);
    }
  };
  return { replies, record };
}

// BF.INFO without its Size, which is each module's own bytes.
function withoutSize(info) {
  assert.equal(typeof info.Size, 'number');
  assert.ok(info.Size > 0);
  const { Size, ...rest } = info;
  return rest;
}

// The calls compared between the two modules: every `bf` command of node-redis, options,
// binary and empty items, the errors users meet (an existing key, NOCREATE, a full
// non-scaling filter, a key of another type), a pipeline and a transaction.
async function everyCommand(client) {
  const { replies, record } = recorder();
  await record('reserve', () => client.bf.reserve('f', 0.0001, 1000));
  await record('reserve again', () => client.bf.reserve('f', 0.01, 10));
  await record('reserve expansion', () => client.bf.reserve('e', 0.01, 100, { EXPANSION: 4 }));
  await record('reserve nonscaling', () => client.bf.reserve('n', 0.01, 10, { NONSCALING: true }));
  await record('add', () => client.bf.add('f', 'a'));
  await record('add again', () => client.bf.add('f', 'a'));
  await record('mAdd', () => client.bf.mAdd('f', ['a', 'b', 'c']));
  await record('add binary', () => client.bf.add('f', Buffer.from([0, 255, 1, 128])));
  await record('add empty', () => client.bf.add('f', ''));
  await record('add text', () => client.bf.add('f', 'naïve ☃'));
  await record('exists', () => client.bf.exists('f', 'b'));
  await record('exists binary', () => client.bf.exists('f', Buffer.from([0, 255, 1, 128])));
  await record('exists empty', () => client.bf.exists('f', ''));
  await record('exists never added', () => client.bf.exists('f', 'never'));
  await record('mExists', () => client.bf.mExists('f', ['a', 'never', 'c', 'naïve ☃']));
  await record('exists no key', () => client.bf.exists('nokey', 'a'));
  await record('mExists no key', () => client.bf.mExists('nokey', ['a', 'b']));
  await record('card', () => client.bf.card('f'));
  await record('card no key', () => client.bf.card('nokey'));
  await record('info', async () => withoutSize(await client.bf.info('f')));
  await record('info expansion', async () => withoutSize(await client.bf.info('e')));
  await record('info no key', () => client.bf.info('nokey'));
  const many = Array.from({ length: 2000 }, (_, i) => `item:${i}`);
  // A scaling filter grown through two new sub-filters. Which of 2,000 items come out as
  // false positives on insert differs between the modules (their hashes do), so the count
  // is compared within what a 1% filter lets through.
  await record('mAdd many', async () => {
    const added = (await client.bf.mAdd('e', many)).filter(Boolean).length;
    const { 'Number of items inserted': inserted, ...info } = withoutSize(await client.bf.info('e'));
    assert.equal(await client.bf.card('e'), inserted);
    assert.ok(added >= 1950 && added <= 2000, `${added} added`);
    return { info, sameAsAdded: inserted === added };
  });
  await record('mExists many', async () => (await client.bf.mExists('e', many)).every(Boolean));
  await record('fill nonscaling', () => client.bf.mAdd('n', many.slice(0, 9)));
  await record('add to a full nonscaling', () => client.bf.add('n', 'one more'));
  await record('info nonscaling', async () => withoutSize(await client.bf.info('n')));
  await record('insert', () => client.bf.insert('i', ['x', 'y', 'x'], {
    CAPACITY: 500, ERROR: 0.001, EXPANSION: 4,
  }));
  await record('insert existing', () => client.bf.insert('i', ['y', 'z'], { CAPACITY: 7 }));
  await record('info insert', async () => withoutSize(await client.bf.info('i')));
  await record('insert nonscaling', () => client.bf.insert('j', ['x'], {
    CAPACITY: 100, NONSCALING: true,
  }));
  await record('info insert nonscaling', async () => withoutSize(await client.bf.info('j')));
  await record('insert nocreate', () => client.bf.insert('nokey', ['x'], { NOCREATE: true }));
  await record('exists after nocreate', () => client.exists('nokey'));
  await client.set('s', 'a string');
  await record('add wrong type', () => client.bf.add('s', 'a'));
  await record('exists wrong type', () => client.bf.exists('s', 'a'));
  await record('mExists wrong type', () => client.bf.mExists('s', ['a', 'b']));
  await record('info wrong type', () => client.bf.info('s'));
  await record('pipeline', () => Promise.all([
    client.bf.add('p', 'x'), client.bf.exists('p', 'x'), client.bf.card('p'),
  ]));
  await record('transaction', () => client.multi()
    .bf.add('t', 'x')
    .bf.mAdd('t', ['x', 'y'])
    .bf.mExists('t', ['y', 'never'])
    .bf.card('t')
    .exec());
  await record('type', () => client.type('f'));
  return replies;
}

const WRONGTYPE = 'WRONGTYPE Operation against a key holding the wrong kind of value';

// Where lcbloom answers otherwise on purpose (docs/operations.md): its data type's own name,
// and lookups on a key of another type refused as every other command's are, where
// RedisBloom answers that the item is absent. [lcbloom's reply, RedisBloom's].
const DIFFERENCES = {
  type: [['lcbloomBF'], ['MBbloom--']],
  'exists wrong type': [['SimpleError', WRONGTYPE], [false]],
  'mExists wrong type': [['SimpleError', WRONGTYPE], [[false, false]]],
};

for (const RESP of PROTOCOLS) {
  test(`every bf command answers as RedisBloom's (RESP ${RESP ?? 'default'})`, async () => {
    const ours = await withClient(LCBLOOM, RESP, everyCommand);
    const theirs = await withClient(REDISBLOOM, RESP, everyCommand);
    assert.equal(ours.length, theirs.length);
    for (let i = 0; i < ours.length; i += 1) {
      const name = ours[i][0];
      if (name in DIFFERENCES) {
        assert.deepEqual([ours[i].slice(1), theirs[i].slice(1)], DIFFERENCES[name], name);
      } else {
        assert.deepEqual(ours[i], theirs[i], `call ${name}`);
      }
    }
    // The comparison must cover what users rely on: replies of each kind.
    const byName = Object.fromEntries(ours.map(([name, ...rest]) => [name, rest]));
    assert.deepEqual(byName.mAdd, [[false, true, true]]);
    assert.deepEqual(byName['reserve again'], ['SimpleError', 'ERR item exists']);
    assert.deepEqual(byName['add wrong type'][0], 'SimpleError');
    assert.match(byName['add wrong type'][1], /^WRONGTYPE/);
    assert.deepEqual(byName.transaction, [[true, [false, true], [true, false], 2]]);
  });
}

// Moves a filter key by key through BF.SCANDUMP and BF.LOADCHUNK, chunks as Buffers (as
// node-redis users must ask for them: a chunk decoded as text loses bytes).
async function moveByChunks(from, key, to, target) {
  const source = from.withTypeMapping({ [RESP_TYPES.BLOB_STRING]: Buffer });
  let iterator = 0;
  let chunks = 0;
  for (;;) {
    const dump = await source.bf.scanDump(key, iterator);
    iterator = dump.iterator;
    if (iterator === 0) {
      return chunks;
    }
    assert.ok(Buffer.isBuffer(dump.chunk));
    assert.equal(await to.bf.loadChunk(target, iterator, dump.chunk), 'OK');
    chunks += 1;
  }
}

for (const RESP of PROTOCOLS) {
  test(`scanDump and loadChunk copy a filter, and import one from RedisBloom (RESP ${RESP ?? 'default'})`, async () => {
    const items = Array.from({ length: 5000 }, (_, i) => `user:${i}@example.com`);
    const ours = await connect(LCBLOOM, RESP);
    const theirs = await connect(REDISBLOOM, RESP);
    try {
      await ours.flushAll();
      await theirs.flushAll();
      for (const client of [ours, theirs]) {
        await client.bf.reserve('src', 0.001, 1000);
        await client.bf.mAdd('src', items);
      }
      assert.ok(await moveByChunks(ours, 'src', ours, 'copy') > 0);
      assert.deepEqual(await ours.bf.info('copy'), await ours.bf.info('src'));
      assert.ok((await ours.bf.mExists('copy', items)).every(Boolean));

      assert.ok(await moveByChunks(theirs, 'src', ours, 'imported') > 0);
      assert.ok((await ours.bf.mExists('imported', items)).every(Boolean));
      assert.equal(await ours.bf.card('imported'), await theirs.bf.card('src'));
      assert.deepEqual(withoutSize(await ours.bf.info('imported')),
        withoutSize(await theirs.bf.info('src')));
      // The imported filter takes new items as any filter does.
      assert.equal(await ours.bf.add('imported', 'new@example.com'), true);
      assert.equal(await ours.bf.exists('imported', 'new@example.com'), true);
    } finally {
      ours.destroy();
      theirs.destroy();
    }
  });
}

test('a chunk read as text is refused, and no key is made', async () => {
  await withClient(LCBLOOM, undefined, async (client) => {
    await client.bf.reserve('src', 0.01, 100);
    await client.bf.mAdd('src', ['a', 'b', 'c']);
    // The default type mapping decodes the chunk as UTF-8, replacing the bytes it cannot.
    const dump = await client.bf.scanDump('src', 0);
    assert.equal(typeof dump.chunk, 'string');
    await assert.rejects(client.bf.loadChunk('broken', dump.iterator, dump.chunk),
      (error) => error instanceof ErrorReply && /^ERR /.test(error.message));
    assert.equal(await client.exists('broken'), 0);
    assert.equal(await client.bf.card('src'), 3);
  });
});

for (const RESP of PROTOCOLS) {
  test(`LC commands through sendCommand (RESP ${RESP ?? 'default'})`, async () => {
    await withClient(LCBLOOM, RESP, async (client) => {
      assert.equal(await client.sendCommand(['LC.RESERVE', 'c', '0.01', '50000']), 'OK');
      assert.equal(await client.sendCommand(['LC.ADD', 'c', 'a', 'b', 'c']), 3);
      assert.equal(await client.sendCommand(['LC.ADD', 'c', 'a', 'd']), 1);
      assert.equal(await client.sendCommand(['LC.ADD', 'd', 'd', 'e']), 2);
      assert.equal(await client.sendCommand(['LC.COUNT', 'c']), 4);
      assert.equal(await client.sendCommand(['LC.COUNT', 'c', 'd', 'missing']), 5);
      assert.equal(await client.sendCommand(['LC.MERGE', 'u', 'c', 'd']), 'OK');
      assert.equal(await client.sendCommand(['LC.COUNT', 'u']), 5);
      const info = await client.sendCommand(['LC.INFO', 'u']);
      // A map under RESP3 (node-redis makes it an object), a flat array under RESP2.
      const fields = (RESP ?? 3) === 3 ? Object.keys(info) : info.filter((_, i) => i % 2 === 0);
      assert.deepEqual(fields, ['Capacity', 'Error rate', 'Size', 'Bits', 'Bits set', 'Mode',
        'Count', 'Standard error', 'Saturated', 'Exact up to']);
      await assert.rejects(client.sendCommand(['LC.RESERVE', 'c', '0.01', '50000']),
        /ERR item exists/);
      await assert.rejects(client.sendCommand(['LC.ADD']), /wrong number of arguments/);
    });
  });
}

test('a cluster client routes every bf command to its key\'s node', async () => {
  const cluster = createCluster({
    rootNodes: CLUSTER.map((port) => ({ socket: { host: '127.0.0.1', port } })),
  });
  cluster.on('error', () => {});
  await cluster.connect();
  try {
    const keys = Array.from({ length: 30 }, (_, i) => `customer:${i}:contacts`);
    for (const key of keys) {
      await cluster.del(key);
      assert.deepEqual(await cluster.bf.mAdd(key, [`${key}:a`, `${key}:b`]), [true, true]);
    }
    const replies = await Promise.all(keys.map((key) => cluster.bf.mExists(key, [`${key}:a`,
      `${key}:b`, `${key}:never`])));
    assert.ok(replies.every((r) => r[0] && r[1]));
    const cards = await Promise.all(keys.map((key) => cluster.bf.card(key)));
    assert.deepEqual(cards, keys.map(() => 2));
    // Keys on every node: the routing was exercised, not one node's slots.
    const holding = await Promise.all(cluster.masters.map(async (node) => {
      const client = await cluster.nodeClient(node);
      return client.dbSize();
    }));
    assert.equal(holding.length, 3);
    assert.ok(holding.every((n) => n > 0), `keys per node: ${holding}`);
    await Promise.all(keys.map((key) => cluster.del(key)));
  } finally {
    cluster.destroy();
  }
});
