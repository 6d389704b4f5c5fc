#include "server/watch_token_check.h"

#include <cstring>

#include "grpcpp/server_context.h"

namespace habitat {
namespace {

class WatchTokenCheck : public grpc::experimental::Interceptor {
 public:
  WatchTokenCheck(grpc::experimental::ServerRpcInfo* info, const Authenticator* authenticator)
      : info_(info), authenticator_(authenticator) {}

  void Intercept(grpc::experimental::InterceptorBatchMethods* methods) override {
    if (methods->QueryInterceptionHookPoint(
            grpc::experimental::InterceptionHookPoints::POST_RECV_INITIAL_METADATA) &&
        !authenticator_->Authenticate(*methods->GetRecvInitialMetadata()).ok()) {
      // An interceptor cannot finish a call with a status of its own;
      // cancelling ends the stream before the health service answers.
      info_->server_context()->TryCancel();
    }
    methods->Proceed();
  }

 private:
  grpc::experimental::ServerRpcInfo* info_;
  const Authenticator* authenticator_;
};

class WatchTokenCheckFactory : public grpc::experimental::ServerInterceptorFactoryInterface {
 public:
  explicit WatchTokenCheckFactory(const Authenticator* authenticator)
      : authenticator_(authenticator) {}

  grpc::experimental::Interceptor* CreateServerInterceptor(
      grpc::experimental::ServerRpcInfo* info) override {
    // Only Watch streams outlive a call; everything else passes untouched.
    if (!authenticator_->enabled() || info->method() == nullptr ||
        std::strcmp(info->method(), kHealthWatchMethod) != 0) {
      return nullptr;
    }
    return new WatchTokenCheck(info, authenticator_);
  }

 private:
  const Authenticator* authenticator_;
};

}  // namespace

std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface> MakeWatchTokenCheck(
    const Authenticator* authenticator) {
  return std::make_unique<WatchTokenCheckFactory>(authenticator);
}

}  // namespace habitat
