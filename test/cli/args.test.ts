/** `callbridge serve` argument parsing, as a pure function. */
import { describe, expect, it } from 'vitest';
import { parseCommand, parseUser, UsageError } from '../../src/cli/args.js';

describe('parseCommand', () => {
  it('applies the defaults of SPEC §1', () => {
    expect(parseCommand(['serve', '--user', 'dev:pw'], {})).toEqual({
      kind: 'serve',
      host: '127.0.0.1',
      port: 6345,
      dbPath: 'callbridge.db',
      users: [{ username: 'dev', password: 'pw', entities: ['*'] }],
      completeMode: false,
      logger: false,
    });
  });

  it('reads every option, repeated users and CALLBRIDGE_USERS', () => {
    const command = parseCommand(
      ['serve', '--host', '0.0.0.0', '--port', '0', '--db', ':memory:', '--user', 'a:x:acme,beta', '--user', 'b:y', '--complete-mode', '--log'],
      { CALLBRIDGE_USERS: 'c:z:*; d:w:solo;' },
    );
    expect(command).toEqual({
      kind: 'serve',
      host: '0.0.0.0',
      port: 0,
      dbPath: ':memory:',
      users: [
        { username: 'a', password: 'x', entities: ['acme', 'beta'] },
        { username: 'b', password: 'y', entities: ['*'] },
        { username: 'c', password: 'z', entities: ['*'] },
        { username: 'd', password: 'w', entities: ['solo'] },
      ],
      completeMode: true,
      logger: true,
    });
  });

  it('takes an IPv6 host also in brackets, as URLs write it', () => {
    expect(parseCommand(['serve', '--user', 'a:pw', '--host', '[::1]'], {})).toMatchObject({ host: '::1' });
    expect(parseCommand(['serve', '--user', 'a:pw', '--host', '::1'], {})).toMatchObject({ host: '::1' });
  });

  it('returns help for --help and -h', () => {
    expect(parseCommand(['--help'], {})).toEqual({ kind: 'help' });
    expect(parseCommand(['serve', '-h'], {})).toEqual({ kind: 'help' });
  });

  it.each([
    [[], /Missing command/],
    [['run'], /Unknown command "run"/],
    [['serve', 'extra', '--user', 'a:b'], /Unexpected argument "extra"/],
    [['serve', '--user', 'a:b', '--port', '70000'], /--port must be an integer from 0 to 65535, got "70000"/],
    [['serve', '--user', 'a:b', '--port', 'http'], /--port/],
    [['serve', '--user', 'a:b', '--port', '-1'], /--port/],
    [['serve', '--user', 'a:b', '--verbose'], /Unknown option "--verbose"/],
    [['serve', '--user'], /argument missing|--user/],
    [['serve'], /No users configured/],
    [['serve', '--user', 'nopassword'], /expected NAME:PASSWORD/],
    [['serve', '--user', ':pw'], /expected NAME:PASSWORD/],
    [['serve', '--user', 'a:'], /empty password/],
    [['serve', '--user', 'a:pw:'], /invalid entity list/],
    [['serve', '--user', 'a:pw:x/y'], /invalid entity list/],
    [['serve', '--user', 'a:pw', '--user', 'a:other'], /configured twice/],
    [['serve', '--user', 'a:pw', '--host', ''], /--host/],
    [['serve', '--user', 'a:pw', '--host', '[localhost]'], /brackets hold an IPv6 address only/],
    [['serve', '--user', 'a:pw', '--host', '[127.0.0.1]'], /brackets hold an IPv6 address only/],
    [['serve', '--user', 'a:pw', '--db', ''], /--db must not be empty/],
  ])('rejects %j', (argv, message) => {
    expect(() => parseCommand(argv, {})).toThrow(UsageError);
    expect(() => parseCommand(argv, {})).toThrow(message);
  });

  it('never echoes a password in an error', () => {
    expect(() => parseUser('nocolon-secret', '--user')).toThrow(/nocolon-secret/);
    try {
      parseCommand(['serve', '--user', 'a:pw:'], {});
    } catch (error) {
      expect((error as Error).message).not.toContain('pw');
    }
  });

  it('keeps colons inside a password when entities follow', () => {
    expect(parseUser('svc:pa:ss:acme', 'x')).toEqual({ username: 'svc', password: 'pa:ss', entities: ['acme'] });
  });
});
