// SPDX-License-Identifier: MIT
// `ctfscope serve`: loads the viewer's data from the server (GET /data.json) instead of an
// embedded document, and in live mode polls it every second, redrawing through
// window.ctsLoadData (viewer_loader.js) when the server has a new generation. The status line is
// set through textContent only.
(function () {
  'use strict';
  if (!window.fetch || document.getElementById('cts-data').textContent.trim() !== '') return;
  const api = (window.ctsLive = { generation: 0, loads: 0, polls: 0, state: 'loading', events: 0 });
  const status = document.createElement('span');
  status.id = 'live-status';
  status.className = 'gen';
  const header = document.querySelector('header.top');
  header.insertBefore(status, document.getElementById('generator'));
  function eventsOf(d) {
    let n = 0;
    if (d.mem && d.mem.events) for (const k in d.mem.events) n += d.mem.events[k];
    if (d.tasks) n += d.tasks.events || 0;
    return n;
  }
  function grouped(n) { return String(Math.round(n)).replace(/\B(?=(\d{3})+(?!\d))/g, ' '); }
  function show(d) {
    const live = d.live;
    api.events = eventsOf(d);
    if (!live) { status.textContent = ''; return; }
    api.state = live.state;
    const when = new Date(live.updated_unix_ms).toLocaleTimeString();
    let text;
    if (live.state === 'waiting') text = 'live: waiting for a trace on ' + live.trace_port;
    else text = 'live' + (live.state === 'ended' ? ' (ended)' : '') + ': ' + grouped(api.events) +
      ' events, last update ' + when;
    status.textContent = text;
    status.title = live.message || '';
  }
  function fail(why) {
    status.textContent = 'live: ' + why + ' (retrying)';
  }
  async function poll() {
    api.polls++;
    let again = true;
    try {
      const url = api.generation ? '/data.json?since=' + api.generation : '/data.json';
      const r = await fetch(url, { cache: 'no-store' });
      if (r.status === 200) {
        const d = await r.json();
        api.generation = d.live ? d.live.generation : 1;
        api.loads++;
        window.ctsLoadData(d);
        show(d);
        again = !!d.live;
      } else if (r.status !== 204) {
        fail('the server answered ' + r.status);
      }
    } catch (e) {
      fail('cannot reach the server');
    }
    if (again) setTimeout(poll, 1000);
  }
  poll();
})();
