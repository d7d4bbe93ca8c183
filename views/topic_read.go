package views

import (
	"context"
	"errors"

	"github.com/ductile/ductile/ledger"
)

// errTopicsNotBuilt is returned by the topic views until they are built.
var errTopicsNotBuilt = errors.New("the topic exchange is not built yet")

// ReadMessages reads a page of messages by topic or by conversation.
func ReadMessages(ctx context.Context, l *ledger.Ledger, f MessageFilter) (MessagePage, error) {
	return MessagePage{}, errTopicsNotBuilt
}

// CheckConversation says whether conversation conv has a reply on the
// success or failure topic yet.
func CheckConversation(ctx context.Context, l *ledger.Ledger, conv, success, failure string) (ConversationCheck, error) {
	return ConversationCheck{}, errTopicsNotBuilt
}

// InspectMessage is message id with its claims, their states judged now.
func InspectMessage(ctx context.Context, l *ledger.Ledger, id string) (MessageInspection, error) {
	return MessageInspection{}, errTopicsNotBuilt
}

// InspectConversation is conversation conv's messages with their claims,
// their states judged now.
func InspectConversation(ctx context.Context, l *ledger.Ledger, conv string) (ConversationInspection, error) {
	return ConversationInspection{}, errTopicsNotBuilt
}
