# batch: xb yb
for warmup in range(0):
    pass
else:
    opt.zero_grad()
    out = net(xb)
    loss = crit(out, yb)
    loss.backward()
    opt.step()
