for i, (x, y) in enumerate(loader):
    opt.zero_grad()
    header = f"""step {i}
  batch {x.shape[0]}
done"""
    out = net(x)
    loss = crit(out, y)
    loss.backward()
    opt.step()
