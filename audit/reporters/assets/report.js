(function () {
  var cells = JSON.parse(document.getElementById('cells').textContent);
  var detail = document.getElementById('detail');
  function text(tag, value, cls) { var e = document.createElement(tag); e.textContent = value; if (cls) e.className = cls; return e; }
  function show(td) {
    document.querySelectorAll('td.chosen').forEach(function (x) { x.classList.remove('chosen'); });
    td.classList.add('chosen');
    detail.replaceChildren();
    td.dataset.cells.split(',').forEach(function (i) {
      var c = cells[+i], box = document.createElement('div');
      box.className = 'one';
      box.appendChild(text('h3', c.entry + ' · ' + c.check + ' (' + c.dtype + ', ' + c.device + '): ' + c.status));
      box.appendChild(text('p', 'owner ' + c.owner.join(', ') + (c.claimed ? ' · claimed' : ' · not claimed') +
                                ' · ' + c.examples + ' examples · ' + c.seconds + ' s'));
      if (c.message) box.appendChild(text('p', c.message, 'message'));
      if (c.repro) { var p = text('p', 'Replay: '); p.appendChild(text('code', c.repro, 'repro')); box.appendChild(p); }
      if (c.case) box.appendChild(text('pre', JSON.stringify(c.case, null, 1)));
      if (c.metrics) box.appendChild(text('pre', JSON.stringify(c.metrics, null, 1)));
      detail.appendChild(box);
    });
    detail.hidden = false;
  }
  document.querySelectorAll('td.cell').forEach(function (td) {
    td.addEventListener('click', function () { show(td); });
    td.addEventListener('keydown', function (e) { if (e.key === 'Enter') show(td); });
  });
  function filter() {
    var owner = document.getElementById('owner').value;
    var wanted = {};
    document.querySelectorAll('.statuses input').forEach(function (b) { wanted[b.value] = b.checked; });
    document.querySelectorAll('.grid tbody tr').forEach(function (tr) {
      tr.hidden = owner !== '' && JSON.parse(tr.dataset.owners).indexOf(owner) < 0;
      tr.querySelectorAll('td.cell').forEach(function (td) {
        var any = td.dataset.statuses.split(' ').some(function (s) { return wanted[s]; });
        td.classList.toggle('dim', !any);
      });
    });
  }
  document.getElementById('owner').addEventListener('change', filter);
  document.querySelectorAll('.statuses input').forEach(function (b) { b.addEventListener('change', filter); });
})();
