/* shellmcp in-shell escalation client, shared by the patched bash 5.2.15 and zsh 5.9.
 *
 * scripts/build-shells.sh copies this file next to bash's execute_cmd.c and zsh's Src/exec.c, and our
 * exec-wrapper patches #include it there; everything is static, no Makefile changes.
 *
 * Contract (the environment passed to execve decides, not the shell's own variables):
 *   EXEC_WRAPPER / BASH_EXEC_WRAPPER   set (as before): interception is on.
 *   SHELLMCP_INTERCEPT                 absent: every exec goes to the exec wrapper, exactly as before.
 *                                      present: the intercept set. Entries separated by '/': NAME matches a
 *                                      program whose basename is NAME, *SUFFIX one whose basename ends with
 *                                      SUFFIX ("*" alone: every program). Programs outside the set are exec'd
 *                                      directly; programs in it (and every path whose basename is empty, ".",
 *                                      ".." or not valid UTF-8) are decided by this client, in the process that
 *                                      is about to exec, speaking the escalation protocol itself.
 *
 * The client does what the `codex-execve-wrapper` role does (src/escalate/wrapper.ts), byte for byte on the
 * wire: a 1-byte datagram with one end of a new stream socketpair (SCM_RIGHTS) on $CODEX_ESCALATE_SOCKET, then
 * the EscalateRequest frame (u32 LE length + compact JSON {"file","argv","workdir","env"}; argv/env decoded as
 * lossy UTF-8 with U+FFFD, env ordered as a JavaScript object: array-index keys first, ascending; keys that are
 * not valid UTF-8 dropped; protocol variables dropped), then:
 *   Run       reset signal dispositions and mask, return: the shell execs the program itself;
 *   Escalate  send fds 0-2 (SuperExecMessage), wait for SuperExecResult, _exit with its exit_code;
 *   Deny      "Execution denied[: reason]" on stderr, _exit(1);
 *   any failure: "Error: <what>" on stderr, _exit(1) -- fail closed, the program is never run unasked.
 */

#include <sys/types.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <signal.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <fcntl.h>

/* Portability (macOS has neither MSG_NOSIGNAL nor SOCK_CLOEXEC; it has SO_NOSIGPIPE). */
#ifndef MSG_NOSIGNAL
#define MSG_NOSIGNAL 0
#endif

#define SMCP_SKIP 0     /* exec directly */
#define SMCP_CLIENT 1   /* decide with the in-shell client */
#define SMCP_WRAPPER 2  /* hand to the exec wrapper (no SHELLMCP_INTERCEPT) */

#define SMCP_MAX_RESPONSE_BYTES (1u << 20)
#define SMCP_MAX_REQUEST_BYTES (64u * 1024 * 1024)

/* ---------------------------------------------------------------------------------------------------- */
/* small helpers */

typedef struct { char *p; size_t n, cap; int oom; } smcp_buf;

static void
smcp_reserve (smcp_buf *b, size_t more)
{
  size_t want;
  char *q;

  if (b->oom || b->n + more <= b->cap)
    return;
  want = b->cap ? b->cap : 4096;
  while (want < b->n + more)
    want *= 2;
  q = (char *) realloc (b->p, want);
  if (q == 0)
    {
      b->oom = 1;
      return;
    }
  b->p = q;
  b->cap = want;
}

static void
smcp_put (smcp_buf *b, const char *s, size_t n)
{
  smcp_reserve (b, n);
  if (b->oom)
    return;
  memcpy (b->p + b->n, s, n);
  b->n += n;
}

static void
smcp_putc (smcp_buf *b, char c)
{
  smcp_put (b, &c, 1);
}

static void
smcp_puts (smcp_buf *b, const char *s)
{
  smcp_put (b, s, strlen (s));
}

static void
smcp_write_all (int fd, const char *s, size_t n)
{
  ssize_t w;

  while (n > 0)
    {
      w = write (fd, s, n);
      if (w < 0 && errno == EINTR)
	continue;
      if (w <= 0)
	return;
      s += w;
      n -= (size_t) w;
    }
}

static void smcp_fail (const char *what, const char *cause) __attribute__ ((noreturn));

/* "Error: WHAT[: CAUSE]" on stderr, exit 1: the wrapper's failure convention. */
static void
smcp_fail (const char *what, const char *cause)
{
  smcp_buf m = { 0 };

  smcp_puts (&m, "Error: ");
  smcp_puts (&m, what);
  if (cause)
    {
      smcp_puts (&m, ": ");
      smcp_puts (&m, cause);
    }
  smcp_putc (&m, '\n');
  if (!m.oom)
    smcp_write_all (2, m.p, m.n);
  _exit (1);
}

/* Length of the valid UTF-8 sequence starting at s[0] (n bytes available), or 0 when it is not valid; on 0,
   *bad is the length of the maximal ill-formed subpart (WHATWG: replaced by one U+FFFD). */
static size_t
smcp_utf8_seq (const unsigned char *s, size_t n, size_t *bad)
{
  unsigned char c = s[0];
  size_t need, i;
  unsigned char lo = 0x80, hi = 0xBF;

  if (c < 0x80)
    return 1;
  if (c >= 0xC2 && c <= 0xDF)
    need = 1;
  else if (c >= 0xE0 && c <= 0xEF)
    {
      need = 2;
      if (c == 0xE0) lo = 0xA0;
      if (c == 0xED) hi = 0x9F;
    }
  else if (c >= 0xF0 && c <= 0xF4)
    {
      need = 3;
      if (c == 0xF0) lo = 0x90;
      if (c == 0xF4) hi = 0x8F;
    }
  else
    {
      *bad = 1;
      return 0;
    }
  for (i = 1; i <= need; i++)
    {
      if (i >= n || s[i] < lo || s[i] > hi)
	{
	  *bad = i;
	  return 0;
	}
      lo = 0x80;
      hi = 0xBF;
    }
  return need + 1;
}

static int
smcp_valid_utf8 (const char *s, size_t n)
{
  size_t i = 0, k, bad;

  while (i < n)
    {
      k = smcp_utf8_seq ((const unsigned char *) s + i, n - i, &bad);
      if (k == 0)
	return 0;
      i += k;
    }
  return 1;
}

/* Append S as a JSON string exactly as JavaScript's JSON.stringify renders the string a lossy UTF-8 decode of
   S gives: invalid sequences become U+FFFD; '"', '\\' and controls below 0x20 are escaped; the rest is raw. */
static void
smcp_json_str (smcp_buf *b, const char *s, size_t n)
{
  static const char hex[] = "0123456789abcdef";
  size_t i = 0, k, bad;
  unsigned char c;
  char esc[6];

  smcp_reserve (b, n + 2);
  smcp_putc (b, '"');
  while (i < n)
    {
      c = (unsigned char) s[i];
      if (c >= 0x20 && c < 0x80 && c != '"' && c != '\\')
	{
	  /* fast run of plain ASCII */
	  size_t j = i + 1;
	  while (j < n && (unsigned char) s[j] >= 0x20 && (unsigned char) s[j] < 0x80 && s[j] != '"' && s[j] != '\\')
	    j++;
	  smcp_put (b, s + i, j - i);
	  i = j;
	  continue;
	}
      if (c < 0x80)
	{
	  switch (c)
	    {
	    case '"': smcp_put (b, "\\\"", 2); break;
	    case '\\': smcp_put (b, "\\\\", 2); break;
	    case '\b': smcp_put (b, "\\b", 2); break;
	    case '\f': smcp_put (b, "\\f", 2); break;
	    case '\n': smcp_put (b, "\\n", 2); break;
	    case '\r': smcp_put (b, "\\r", 2); break;
	    case '\t': smcp_put (b, "\\t", 2); break;
	    default:
	      esc[0] = '\\'; esc[1] = 'u'; esc[2] = '0'; esc[3] = '0';
	      esc[4] = hex[c >> 4]; esc[5] = hex[c & 15];
	      smcp_put (b, esc, 6);
	    }
	  i++;
	  continue;
	}
      k = smcp_utf8_seq ((const unsigned char *) s + i, n - i, &bad);
      if (k)
	{
	  smcp_put (b, s + i, k);
	  i += k;
	}
      else
	{
	  smcp_put (b, "\xEF\xBF\xBD", 3);
	  i += bad;
	}
    }
  smcp_putc (b, '"');
}

/* Value of NAME in ENV (the last definition, as the JavaScript wrapper's process.env), or NULL. */
static const char *
smcp_env_get (char *const *env, const char *name)
{
  size_t len = strlen (name);
  const char *v = 0;
  int i;

  if (env == 0)
    return 0;
  for (i = 0; env[i]; i++)
    if (strncmp (env[i], name, len) == 0 && env[i][len] == '=')
      v = env[i] + len + 1;
  return v;
}

/* ---------------------------------------------------------------------------------------------------- */
/* the intercept set */

/* SMCP_SKIP, SMCP_CLIENT or SMCP_WRAPPER for an exec of FILE with environment ENV. */
static int
smcp_mode (const char *file, char *const *env)
{
  const char *set, *name, *e, *end;
  size_t flen, nlen, elen;

  set = smcp_env_get (env, "SHELLMCP_INTERCEPT");
  if (set == 0)
    return SMCP_WRAPPER;
  flen = strlen (file);
  if (flen == 0 || file[flen - 1] == '/')
    return SMCP_CLIENT;
  name = strrchr (file, '/');
  name = name ? name + 1 : file;
  nlen = strlen (name);
  if ((nlen == 1 && name[0] == '.') || (nlen == 2 && name[0] == '.' && name[1] == '.'))
    return SMCP_CLIENT;
  if (!smcp_valid_utf8 (name, nlen))
    return SMCP_CLIENT;
  for (e = set; *e; e = *end ? end + 1 : end)
    {
      end = strchr (e, '/');
      if (end == 0)
	end = e + strlen (e);
      elen = (size_t) (end - e);
      if (elen == 0)
	continue;
      if (e[0] == '*')
	{
	  if (elen - 1 <= nlen && memcmp (name + nlen - (elen - 1), e + 1, elen - 1) == 0)
	    return SMCP_CLIENT;
	}
      else if (elen == nlen && memcmp (name, e, nlen) == 0)
	return SMCP_CLIENT;
    }
  return SMCP_SKIP;
}

/* ---------------------------------------------------------------------------------------------------- */
/* the request */

typedef struct
{
  const char *key, *val;
  size_t klen;
  int idx;            /* position in env */
  int drop;
  int isindex;        /* an array-index key ("0".."4294967294", canonical) */
  uint64_t index;
} smcp_env_entry;

static int
smcp_by_key (const void *a, const void *b)
{
  const smcp_env_entry *x = *(const smcp_env_entry *const *) a, *y = *(const smcp_env_entry *const *) b;
  size_t n = x->klen < y->klen ? x->klen : y->klen;
  int c = memcmp (x->key, y->key, n);

  if (c)
    return c;
  if (x->klen != y->klen)
    return x->klen < y->klen ? -1 : 1;
  return x->idx - y->idx;
}

static int
smcp_js_order (const void *a, const void *b)
{
  const smcp_env_entry *x = *(const smcp_env_entry *const *) a, *y = *(const smcp_env_entry *const *) b;

  if (x->isindex != y->isindex)
    return x->isindex ? -1 : 1;
  if (x->isindex)
    return x->index < y->index ? -1 : x->index > y->index;
  return x->idx - y->idx;
}

static int
smcp_is_protocol_var (const char *k, size_t n)
{
  static const char *const names[] = { "CODEX_ESCALATE_SOCKET", "EXEC_WRAPPER", "BASH_EXEC_WRAPPER", "SHELLMCP_INTERCEPT", 0 };
  int i;

  for (i = 0; names[i]; i++)
    if (strlen (names[i]) == n && memcmp (names[i], k, n) == 0)
      return 1;
  return 0;
}

static void
smcp_json_env (smcp_buf *b, char *const *env)
{
  int n = 0, i, j, m = 0, first = 1;
  smcp_env_entry *ents;
  smcp_env_entry **ptrs;
  const char *eq;
  size_t k;

  while (env && env[n])
    n++;
  ents = (smcp_env_entry *) calloc ((size_t) n + 1, sizeof *ents);
  ptrs = (smcp_env_entry **) calloc ((size_t) n + 1, sizeof *ptrs);
  if (ents == 0 || ptrs == 0)
    smcp_fail ("failed to build EscalateRequest", "out of memory");
  for (i = 0; i < n; i++)
    {
      eq = strchr (env[i], '=');
      if (eq == 0 || eq == env[i])
	continue;
      k = (size_t) (eq - env[i]);
      if (!smcp_valid_utf8 (env[i], k))
	continue;
      ents[m].key = env[i];
      ents[m].klen = k;
      ents[m].val = eq + 1;
      ents[m].idx = i;
      if ((k == 1 && env[i][0] == '0') || (k <= 10 && env[i][0] >= '1' && env[i][0] <= '9'))
	{
	  uint64_t v = 0;
	  size_t d;
	  for (d = 0; d < k && env[i][d] >= '0' && env[i][d] <= '9'; d++)
	    v = v * 10 + (uint64_t) (env[i][d] - '0');
	  if (d == k && v <= 4294967294ULL)
	    {
	      ents[m].isindex = 1;
	      ents[m].index = v;
	    }
	}
      ptrs[m] = &ents[m];
      m++;
    }
  /* duplicates: the first position, the last value */
  qsort (ptrs, (size_t) m, sizeof *ptrs, smcp_by_key);
  for (i = 0; i < m; i = j)
    {
      for (j = i + 1; j < m && ptrs[j]->klen == ptrs[i]->klen && memcmp (ptrs[j]->key, ptrs[i]->key, ptrs[i]->klen) == 0; j++)
	ptrs[j]->drop = 1;
      ptrs[i]->val = ptrs[j - 1]->val;
      if (smcp_is_protocol_var (ptrs[i]->key, ptrs[i]->klen))
	ptrs[i]->drop = 1;
    }
  qsort (ptrs, (size_t) m, sizeof *ptrs, smcp_js_order);
  smcp_putc (b, '{');
  for (i = 0; i < m; i++)
    {
      if (ptrs[i]->drop)
	continue;
      if (!first)
	smcp_putc (b, ',');
      first = 0;
      smcp_json_str (b, ptrs[i]->key, ptrs[i]->klen);
      smcp_putc (b, ':');
      smcp_json_str (b, ptrs[i]->val, strlen (ptrs[i]->val));
    }
  smcp_putc (b, '}');
  free (ptrs);
  free (ents);
}

/* ---------------------------------------------------------------------------------------------------- */
/* socket I/O */

static int
smcp_send_all (int fd, const char *p, size_t n, const int *fds, int nfds)
{
  struct msghdr mh;
  struct iovec iov;
  union { struct cmsghdr h; char buf[CMSG_SPACE (3 * sizeof (int))]; } ctl;
  struct cmsghdr *cm;
  ssize_t w;

  while (n > 0)
    {
      memset (&mh, 0, sizeof mh);
      iov.iov_base = (void *) p;
      iov.iov_len = n;
      mh.msg_iov = &iov;
      mh.msg_iovlen = 1;
      if (nfds > 0)
	{
	  memset (&ctl, 0, sizeof ctl);
	  mh.msg_control = ctl.buf;
	  mh.msg_controllen = CMSG_SPACE ((size_t) nfds * sizeof (int));
	  cm = CMSG_FIRSTHDR (&mh);
	  cm->cmsg_level = SOL_SOCKET;
	  cm->cmsg_type = SCM_RIGHTS;
	  cm->cmsg_len = CMSG_LEN ((size_t) nfds * sizeof (int));
	  memcpy (CMSG_DATA (cm), fds, (size_t) nfds * sizeof (int));
	}
      w = sendmsg (fd, &mh, MSG_NOSIGNAL);
      if (w < 0 && errno == EINTR)
	continue;
      if (w < 0)
	return -1;
      nfds = 0;		/* the fds go with the first chunk only */
      p += w;
      n -= (size_t) w;
    }
  return 0;
}

static void
smcp_send_frame (int fd, const char *payload, size_t n, const int *fds, int nfds, const char *what)
{
  char *frame;
  int r;

  if (n > SMCP_MAX_REQUEST_BYTES)
    smcp_fail (what, "message too large");
  frame = (char *) malloc (n + 4);
  if (frame == 0)
    smcp_fail (what, "out of memory");
  frame[0] = (char) (n & 0xff);
  frame[1] = (char) ((n >> 8) & 0xff);
  frame[2] = (char) ((n >> 16) & 0xff);
  frame[3] = (char) ((n >> 24) & 0xff);
  memcpy (frame + 4, payload, n);
  r = smcp_send_all (fd, frame, n + 4, fds, nfds);
  free (frame);
  if (r < 0)
    smcp_fail (what, strerror (errno));
}

static int
smcp_recv_exact (int fd, char *p, size_t n)
{
  ssize_t r;

  while (n > 0)
    {
      r = recv (fd, p, n, 0);
      if (r < 0 && errno == EINTR)
	continue;
      if (r < 0)
	return -1;
      if (r == 0)
	return -2;
      p += r;
      n -= (size_t) r;
    }
  return 0;
}

/* One frame's payload (malloc'd, NUL-terminated) from FD; fails closed with WHAT. */
static char *
smcp_recv_frame (int fd, size_t *len, const char *what)
{
  unsigned char h[4];
  size_t n;
  char *p;
  int r;

  r = smcp_recv_exact (fd, (char *) h, 4);
  if (r == -2)
    smcp_fail (what, "socket closed while receiving frame header");
  if (r < 0)
    smcp_fail (what, strerror (errno));
  n = (size_t) h[0] | ((size_t) h[1] << 8) | ((size_t) h[2] << 16) | ((size_t) h[3] << 24);
  if (n > SMCP_MAX_RESPONSE_BYTES)
    smcp_fail (what, "frame too large");
  p = (char *) malloc (n + 1);
  if (p == 0)
    smcp_fail (what, "out of memory");
  r = smcp_recv_exact (fd, p, n);
  if (r == -2)
    smcp_fail (what, "socket closed while receiving frame payload");
  if (r < 0)
    smcp_fail (what, strerror (errno));
  p[n] = 0;
  *len = n;
  return p;
}

/* ---------------------------------------------------------------------------------------------------- */
/* a small JSON reader for the server's answers (JSON.parse semantics: unknown fields ignored, the last of
   duplicate keys wins) */

typedef struct { const char *p, *end; int depth; } smcp_json;

static void
smcp_ws (smcp_json *j)
{
  while (j->p < j->end && (*j->p == ' ' || *j->p == '\t' || *j->p == '\n' || *j->p == '\r'))
    j->p++;
}

static void
smcp_put_utf8 (smcp_buf *b, unsigned long cp)
{
  char u[4];

  if (cp < 0x80)
    smcp_putc (b, (char) cp);
  else if (cp < 0x800)
    {
      u[0] = (char) (0xC0 | (cp >> 6)); u[1] = (char) (0x80 | (cp & 63));
      smcp_put (b, u, 2);
    }
  else if (cp < 0x10000)
    {
      u[0] = (char) (0xE0 | (cp >> 12)); u[1] = (char) (0x80 | ((cp >> 6) & 63)); u[2] = (char) (0x80 | (cp & 63));
      smcp_put (b, u, 3);
    }
  else
    {
      u[0] = (char) (0xF0 | (cp >> 18)); u[1] = (char) (0x80 | ((cp >> 12) & 63));
      u[2] = (char) (0x80 | ((cp >> 6) & 63)); u[3] = (char) (0x80 | (cp & 63));
      smcp_put (b, u, 4);
    }
}

static int
smcp_hex4 (const char *p, unsigned long *v)
{
  int i;

  *v = 0;
  for (i = 0; i < 4; i++)
    {
      char c = p[i];
      *v <<= 4;
      if (c >= '0' && c <= '9') *v |= (unsigned long) (c - '0');
      else if (c >= 'a' && c <= 'f') *v |= (unsigned long) (c - 'a' + 10);
      else if (c >= 'A' && c <= 'F') *v |= (unsigned long) (c - 'A' + 10);
      else return 0;
    }
  return 1;
}

/* A string at j->p; its decoded UTF-8 into OUT (if not NULL). 0 on a syntax error. */
static int
smcp_json_string (smcp_json *j, smcp_buf *out)
{
  unsigned long cp, lo;

  if (j->p >= j->end || *j->p != '"')
    return 0;
  j->p++;
  while (j->p < j->end)
    {
      unsigned char c = (unsigned char) *j->p;
      if (c == '"')
	{
	  j->p++;
	  return 1;
	}
      if (c < 0x20)
	return 0;
      if (c != '\\')
	{
	  if (out)
	    smcp_putc (out, (char) c);
	  j->p++;
	  continue;
	}
      if (j->p + 1 >= j->end)
	return 0;
      c = (unsigned char) j->p[1];
      j->p += 2;
      switch (c)
	{
	case '"': case '\\': case '/': if (out) smcp_putc (out, (char) c); break;
	case 'b': if (out) smcp_putc (out, '\b'); break;
	case 'f': if (out) smcp_putc (out, '\f'); break;
	case 'n': if (out) smcp_putc (out, '\n'); break;
	case 'r': if (out) smcp_putc (out, '\r'); break;
	case 't': if (out) smcp_putc (out, '\t'); break;
	case 'u':
	  if (j->end - j->p < 4 || !smcp_hex4 (j->p, &cp))
	    return 0;
	  j->p += 4;
	  if (cp >= 0xD800 && cp <= 0xDBFF && j->end - j->p >= 6 && j->p[0] == '\\' && j->p[1] == 'u'
	      && smcp_hex4 (j->p + 2, &lo) && lo >= 0xDC00 && lo <= 0xDFFF)
	    {
	      j->p += 6;
	      cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
	    }
	  else if (cp >= 0xD800 && cp <= 0xDFFF)
	    cp = 0xFFFD;	/* a lone surrogate prints as U+FFFD */
	  if (out)
	    smcp_put_utf8 (out, cp);
	  break;
	default:
	  return 0;
	}
    }
  return 0;
}

/* A number at j->p; its value in *v. 0 on a syntax error. */
static int
smcp_json_number (smcp_json *j, double *v)
{
  const char *s = j->p;
  char tmp[64];

  if (j->p < j->end && *j->p == '-')
    j->p++;
  if (j->p >= j->end)
    return 0;
  if (*j->p == '0')
    j->p++;
  else if (*j->p >= '1' && *j->p <= '9')
    while (j->p < j->end && *j->p >= '0' && *j->p <= '9')
      j->p++;
  else
    return 0;
  if (j->p < j->end && *j->p == '.')
    {
      j->p++;
      if (j->p >= j->end || *j->p < '0' || *j->p > '9')
	return 0;
      while (j->p < j->end && *j->p >= '0' && *j->p <= '9')
	j->p++;
    }
  if (j->p < j->end && (*j->p == 'e' || *j->p == 'E'))
    {
      j->p++;
      if (j->p < j->end && (*j->p == '+' || *j->p == '-'))
	j->p++;
      if (j->p >= j->end || *j->p < '0' || *j->p > '9')
	return 0;
      while (j->p < j->end && *j->p >= '0' && *j->p <= '9')
	j->p++;
    }
  if (v)
    {
      if ((size_t) (j->p - s) >= sizeof tmp)
	*v = 1e300;		/* far outside any range we accept */
      else
	{
	  memcpy (tmp, s, (size_t) (j->p - s));
	  tmp[j->p - s] = 0;
	  *v = strtod (tmp, 0);
	}
    }
  return 1;
}

static int smcp_json_skip (smcp_json *j);

/* Iterate an object: calls back per member with the key; the callback must consume the value. */
typedef int (*smcp_member_fn) (smcp_json *j, const char *key, size_t klen, void *ctx);

static int
smcp_json_object (smcp_json *j, smcp_member_fn fn, void *ctx)
{
  smcp_buf key;

  if (j->p >= j->end || *j->p != '{' || ++j->depth > 256)
    return 0;
  j->p++;
  smcp_ws (j);
  if (j->p < j->end && *j->p == '}')
    {
      j->p++;
      j->depth--;
      return 1;
    }
  for (;;)
    {
      memset (&key, 0, sizeof key);
      smcp_ws (j);
      if (!smcp_json_string (j, &key) || key.oom)
	{
	  free (key.p);
	  return 0;
	}
      smcp_ws (j);
      if (j->p >= j->end || *j->p != ':')
	{
	  free (key.p);
	  return 0;
	}
      j->p++;
      smcp_ws (j);
      if (!(fn ? fn (j, key.p ? key.p : "", key.n, ctx) : smcp_json_skip (j)))
	{
	  free (key.p);
	  return 0;
	}
      free (key.p);
      smcp_ws (j);
      if (j->p < j->end && *j->p == ',')
	{
	  j->p++;
	  continue;
	}
      if (j->p < j->end && *j->p == '}')
	{
	  j->p++;
	  j->depth--;
	  return 1;
	}
      return 0;
    }
}

static int
smcp_json_skip (smcp_json *j)
{
  smcp_ws (j);
  if (j->p >= j->end)
    return 0;
  switch (*j->p)
    {
    case '{':
      return smcp_json_object (j, 0, 0);
    case '[':
      if (++j->depth > 256)
	return 0;
      j->p++;
      smcp_ws (j);
      if (j->p < j->end && *j->p == ']')
	{
	  j->p++;
	  j->depth--;
	  return 1;
	}
      for (;;)
	{
	  if (!smcp_json_skip (j))
	    return 0;
	  smcp_ws (j);
	  if (j->p < j->end && *j->p == ',')
	    {
	      j->p++;
	      continue;
	    }
	  if (j->p < j->end && *j->p == ']')
	    {
	      j->p++;
	      j->depth--;
	      return 1;
	    }
	  return 0;
	}
    case '"':
      return smcp_json_string (j, 0);
    case 't':
      if (j->end - j->p >= 4 && memcmp (j->p, "true", 4) == 0) { j->p += 4; return 1; }
      return 0;
    case 'f':
      if (j->end - j->p >= 5 && memcmp (j->p, "false", 5) == 0) { j->p += 5; return 1; }
      return 0;
    case 'n':
      if (j->end - j->p >= 4 && memcmp (j->p, "null", 4) == 0) { j->p += 4; return 1; }
      return 0;
    default:
      return smcp_json_number (j, 0);
    }
}

static int
smcp_json_document (const char *p, size_t n, smcp_member_fn fn, void *ctx)
{
  smcp_json j;

  j.p = p;
  j.end = p + n;
  j.depth = 0;
  smcp_ws (&j);
  if (j.p >= j.end || *j.p != '{')
    return -1;		/* valid JSON maybe, but not an object: checked by the caller */
  if (!smcp_json_object (&j, fn, ctx))
    return 0;
  smcp_ws (&j);
  return j.p == j.end;
}

#define SMCP_ACT_NONE 0
#define SMCP_ACT_RUN 1
#define SMCP_ACT_ESCALATE 2
#define SMCP_ACT_DENY 3
#define SMCP_ACT_UNKNOWN 4

typedef struct { int action; smcp_buf reason; int has_reason; int deny_seen; int reason_ok; } smcp_answer;

static int
smcp_reason_member (smcp_json *j, const char *key, size_t klen, void *ctx)
{
  smcp_answer *a = (smcp_answer *) ctx;

  if (klen == 6 && memcmp (key, "reason", 6) == 0)
    {
      a->reason.n = 0;
      if (j->p < j->end && *j->p == '"')
	{
	  a->has_reason = 1;
	  a->reason_ok = 1;
	  return smcp_json_string (j, &a->reason);
	}
      a->has_reason = 0;
      a->reason_ok = (j->end - j->p >= 4 && memcmp (j->p, "null", 4) == 0);
      return smcp_json_skip (j);
    }
  return smcp_json_skip (j);
}

static int
smcp_deny_member (smcp_json *j, const char *key, size_t klen, void *ctx)
{
  smcp_answer *a = (smcp_answer *) ctx;

  if (klen == 4 && memcmp (key, "Deny", 4) == 0)
    {
      a->has_reason = 0;
      a->reason_ok = 1;		/* missing reason: null */
      a->reason.n = 0;
      if (j->p < j->end && *j->p == '{')
	{
	  a->deny_seen = 1;
	  return smcp_json_object (j, smcp_reason_member, a);
	}
      a->deny_seen = 0;
      return smcp_json_skip (j);
    }
  return smcp_json_skip (j);
}

static int
smcp_action_member (smcp_json *j, const char *key, size_t klen, void *ctx)
{
  smcp_answer *a = (smcp_answer *) ctx;
  smcp_buf s;
  int ok;

  if (!(klen == 6 && memcmp (key, "action", 6) == 0))
    return smcp_json_skip (j);
  a->action = SMCP_ACT_UNKNOWN;
  if (j->p < j->end && *j->p == '"')
    {
      memset (&s, 0, sizeof s);
      ok = smcp_json_string (j, &s);
      if (ok && s.n == 3 && memcmp (s.p, "Run", 3) == 0)
	a->action = SMCP_ACT_RUN;
      else if (ok && s.n == 8 && memcmp (s.p, "Escalate", 8) == 0)
	a->action = SMCP_ACT_ESCALATE;
      free (s.p);
      return ok;
    }
  if (j->p < j->end && *j->p == '{')
    {
      a->deny_seen = 0;
      if (!smcp_json_object (j, smcp_deny_member, a))
	return 0;
      if (a->deny_seen && a->reason_ok)
	a->action = SMCP_ACT_DENY;
      return 1;
    }
  return smcp_json_skip (j);
}

typedef struct { int seen; double code; int isnum; } smcp_result;

static int
smcp_result_member (smcp_json *j, const char *key, size_t klen, void *ctx)
{
  smcp_result *r = (smcp_result *) ctx;

  if (klen == 9 && memcmp (key, "exit_code", 9) == 0)
    {
      r->seen = 1;
      r->isnum = (j->p < j->end && (*j->p == '-' || (*j->p >= '0' && *j->p <= '9')));
      if (r->isnum)
	return smcp_json_number (j, &r->code);
      return smcp_json_skip (j);
    }
  return smcp_json_skip (j);
}

/* ---------------------------------------------------------------------------------------------------- */
/* the client */

static void
smcp_reset_signals (void)
{
  struct sigaction sa;
  sigset_t none;
  int sig;

  memset (&sa, 0, sizeof sa);
  sa.sa_handler = SIG_DFL;
  sigemptyset (&sa.sa_mask);
  for (sig = 1; sig < NSIG; sig++)
    if (sig != SIGKILL && sig != SIGSTOP)
      sigaction (sig, &sa, 0);	/* EINVAL for reserved signals: nothing to reset */
  sigemptyset (&none);
  sigprocmask (SIG_SETMASK, &none, 0);
}

/* Move FD to a number >= 3 (close-on-exec), so that a closed stdin/stdout/stderr stays closed. */
static int
smcp_high_fd (int fd)
{
  int nfd;

  if (fd >= 3)
    return fd;
  nfd = fcntl (fd, F_DUPFD_CLOEXEC, 3);
  close (fd);
  return nfd;
}

/* Decide the exec of FILE with ARGV and ENV. Returns only when the answer is Run (signals reset; the caller
   execs); otherwise exits the process as the exec wrapper would have. */
static void
smcp_escalate (const char *file, char *const *argv, char *const *env)
{
  const char *sockv, *s;
  int sock, sv[2], i, stdfds[3], nstd = 0;
  smcp_buf req = { 0 }, cwd = { 0 }, vq = { 0 };
  char one = 0, *payload;
  size_t plen;
  smcp_answer ans;
  smcp_result res;
  struct msghdr mh;
  struct iovec iov;
  union { struct cmsghdr h; char buf[CMSG_SPACE (sizeof (int))]; } ctl;
  struct cmsghdr *cm;
  ssize_t w;
  int r;

  sockv = smcp_env_get (env, "CODEX_ESCALATE_SOCKET");
  if (sockv == 0)
    smcp_fail ("CODEX_ESCALATE_SOCKET is not set (the wrapper must be started by a shell that shellmcp serve launched)", 0);
  for (s = sockv; *s >= '0' && *s <= '9'; s++)
    ;
  if (*s || s == sockv || s - sockv > 9)
    {
      smcp_puts (&vq, "CODEX_ESCALATE_SOCKET is not a valid file descriptor: ");
      smcp_json_str (&vq, sockv, strlen (sockv));
      smcp_putc (&vq, 0);
      smcp_fail (vq.oom ? "CODEX_ESCALATE_SOCKET is not a valid file descriptor" : vq.p, 0);
    }
  sock = atoi (sockv);

  /* the request: {"file":…,"argv":[…],"workdir":…,"env":{…}} */
  smcp_puts (&req, "{\"file\":");
  smcp_json_str (&req, file, strlen (file));
  smcp_puts (&req, ",\"argv\":[");
  if (argv == 0 || argv[0] == 0)
    smcp_json_str (&req, file, strlen (file));
  else
    for (i = 0; argv[i]; i++)
      {
	if (i)
	  smcp_putc (&req, ',');
	smcp_json_str (&req, argv[i], strlen (argv[i]));
      }
  smcp_puts (&req, "],\"workdir\":");
  for (plen = 4096;; plen *= 2)
    {
      smcp_reserve (&cwd, plen);
      if (cwd.oom)
	smcp_fail ("cannot determine the working directory", "out of memory");
      if (getcwd (cwd.p, cwd.cap))
	break;
      if (errno != ERANGE)
	smcp_fail ("cannot determine the working directory", strerror (errno));
    }
  smcp_json_str (&req, cwd.p, strlen (cwd.p));
  free (cwd.p);
  smcp_puts (&req, ",\"env\":");
  smcp_json_env (&req, env);
  smcp_putc (&req, '}');
  if (req.oom)
    smcp_fail ("failed to send EscalateRequest", "out of memory");

  /* handshake */
#ifdef SOCK_CLOEXEC
  if (socketpair (AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0)
    smcp_fail ("failed to create a socketpair", strerror (errno));
#else
  if (socketpair (AF_UNIX, SOCK_STREAM, 0, sv) < 0)
    smcp_fail ("failed to create a socketpair", strerror (errno));
  fcntl (sv[0], F_SETFD, FD_CLOEXEC);
  fcntl (sv[1], F_SETFD, FD_CLOEXEC);
#endif
#ifdef SO_NOSIGPIPE
  {
    int on = 1;
    setsockopt (sv[0], SOL_SOCKET, SO_NOSIGPIPE, &on, sizeof on);
  }
#endif
  sv[0] = smcp_high_fd (sv[0]);
  sv[1] = smcp_high_fd (sv[1]);
  if (sv[0] < 0 || sv[1] < 0)
    smcp_fail ("failed to create a socketpair", strerror (errno));
  memset (&mh, 0, sizeof mh);
  memset (&ctl, 0, sizeof ctl);
  iov.iov_base = &one;
  iov.iov_len = 1;
  mh.msg_iov = &iov;
  mh.msg_iovlen = 1;
  mh.msg_control = ctl.buf;
  mh.msg_controllen = CMSG_SPACE (sizeof (int));
  cm = CMSG_FIRSTHDR (&mh);
  cm->cmsg_level = SOL_SOCKET;
  cm->cmsg_type = SCM_RIGHTS;
  cm->cmsg_len = CMSG_LEN (sizeof (int));
  memcpy (CMSG_DATA (cm), &sv[1], sizeof (int));
  do
    w = sendmsg (sock, &mh, MSG_NOSIGNAL);
  while (w < 0 && errno == EINTR);
  if (w < 0)
    smcp_fail ("failed to send handshake datagram", strerror (errno));
  if (w != 1)
    smcp_fail ("failed to send handshake datagram: short write", 0);
  close (sv[1]);

  smcp_send_frame (sv[0], req.p, req.n, 0, 0, "failed to send EscalateRequest");
  free (req.p);

  payload = smcp_recv_frame (sv[0], &plen, "failed to receive EscalateResponse");
  memset (&ans, 0, sizeof ans);
  if (!smcp_valid_utf8 (payload, plen))
    smcp_fail ("failed to receive EscalateResponse", "EscalateResponse: payload is not valid UTF-8");
  r = smcp_json_document (payload, plen, smcp_action_member, &ans);
  if (r == 0)
    smcp_fail ("failed to receive EscalateResponse", "EscalateResponse: invalid JSON");
  if (r < 0)
    smcp_fail ("failed to receive EscalateResponse", "EscalateResponse: expected a JSON object");
  free (payload);

  switch (ans.action)
    {
    case SMCP_ACT_RUN:
      close (sv[0]);
      free (ans.reason.p);
      smcp_reset_signals ();
      return;
    case SMCP_ACT_DENY:
      {
	smcp_buf m = { 0 };
	smcp_puts (&m, "Execution denied");
	if (ans.has_reason)
	  {
	    smcp_puts (&m, ": ");
	    /* the reason as a JavaScript string written as UTF-8: invalid bytes cannot occur (checked above) */
	    smcp_put (&m, ans.reason.p ? ans.reason.p : "", ans.reason.n);
	  }
	smcp_putc (&m, '\n');
	if (!m.oom)
	  smcp_write_all (2, m.p, m.n);
	_exit (1);
      }
    case SMCP_ACT_ESCALATE:
      break;
    default:
      smcp_fail ("failed to receive EscalateResponse", "EscalateResponse: unknown action");
    }

  /* Escalate: hand over the open ones of fds 0, 1, 2, wait for the exit code */
  {
    smcp_buf m = { 0 };
    /* A closed one (`cmd >&-`) goes as /dev/null, as with the wrapper (whose runtime reopens closed standard
       fds on /dev/null at start-up), so the server sees the same message. */
    for (i = 0; i < 3; i++)
      {
	if (fcntl (i, F_GETFD) >= 0)
	  stdfds[i] = i;
	else if ((stdfds[i] = open ("/dev/null", O_RDWR | O_CLOEXEC)) < 0)
	  smcp_fail ("failed to send SuperExecMessage", strerror (errno));
	nstd++;
      }
    smcp_puts (&m, "{\"fds\":[");
    for (i = 0; i < nstd; i++)
      {
	if (i)
	  smcp_putc (&m, ',');
	smcp_putc (&m, (char) ('0' + i));
      }
    smcp_puts (&m, "]}");
    if (m.oom)
      smcp_fail ("failed to send SuperExecMessage", "out of memory");
    smcp_send_frame (sv[0], m.p, m.n, stdfds, nstd, "failed to send SuperExecMessage");
    free (m.p);
  }
  payload = smcp_recv_frame (sv[0], &plen, "failed to receive SuperExecResult");
  memset (&res, 0, sizeof res);
  if (!smcp_valid_utf8 (payload, plen))
    smcp_fail ("failed to receive SuperExecResult", "SuperExecResult: payload is not valid UTF-8");
  r = smcp_json_document (payload, plen, smcp_result_member, &res);
  if (r == 0)
    smcp_fail ("failed to receive SuperExecResult", "SuperExecResult: invalid JSON");
  if (r < 0 || !res.seen || !res.isnum || !(res.code > -1e18 && res.code < 1e18) || res.code != (double) (long long) res.code)
    smcp_fail ("failed to receive SuperExecResult", "SuperExecResult: missing or non-integer `exit_code`");
  if (res.code < -2147483648.0 || res.code >= 2147483648.0)
    smcp_fail ("failed to receive SuperExecResult", "SuperExecResult: `exit_code` out of i32 range");
  _exit ((int) res.code);
}
