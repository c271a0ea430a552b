# one training step, no loop
# batch: xb yb
optimizer.zero_grad()
prediction = model(xb)
loss = loss_fn(prediction, yb)
loss.backward()
optimizer.step()
